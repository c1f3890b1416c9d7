package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRetryNotCountedTwice loses the reply to counting calls after Redis
// ran them: a proxy forwards the command, drops the reply and cuts the
// connection, the ambiguous failure on which go-redis (default MaxRetries,
// 3) retries. No call may count twice:
//   - by default, counting calls are not retried: the call returns
//     ErrUnavailable and counted once;
//   - with DedupWindow, go-redis retries and the retry returns the first
//     execution's answer: the call succeeds and counted once;
//   - a refund or an undo (of a Window or a Layered limiter) is never
//     retried: it returns ErrUnavailable and gave back once.
//
// The control runs the same script the way a plain go-redis Script.Run
// would, and counts twice: the fault really causes a retry.
func TestRetryNotCountedTwice(t *testing.T) {
	srv := startServer(t)
	p := newProxy(t, srv.Addr(), "evalsha")
	client := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: p.Addr()}) // MaxRetries: the default, 3
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	const calls = 10
	// A clock that stands still: the windows are epoch-aligned, and a real
	// clock crossing a minute or hour boundary mid-test would start new
	// windows. Redis still expires the keys: PX is relative to this clock.
	now := time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)
	clock := redisstore.LocalClock(func() time.Time { return now })
	for _, dedup := range []time.Duration{0, 5 * time.Second} {
		s, err := redisstore.New(client(), &redisstore.Options{Prefix: newPrefix(), Clock: clock, Timeout: 5 * time.Second, DedupWindow: dedup})
		require.NoError(t, err)
		w, err := s.Window(ratedb.FixedWindow, time.Hour)
		require.NoError(t, err)
		l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 1000}, ratedb.Tier{Scale: time.Hour, Limit: 1000})
		require.NoError(t, err)
		_, err = w.Hit(ctx, "warm-up", 1, 1) // loads the scripts, so that EVALSHA runs them
		require.NoError(t, err)
		_, err = l.Hit(ctx, "warm-up", 1)
		require.NoError(t, err)
		_, err = w.Set(ctx, "refund", 1+calls)
		require.NoError(t, err)
		_, _, err = w.Refund(ctx, "refund", 1) // loads the refund script
		require.NoError(t, err)
		_, err = l.Inc(ctx, "refund", calls)
		require.NoError(t, err)
		undone, err := w.Hit(ctx, "undo", 1000, calls)
		require.NoError(t, err)
		lUndone, err := l.Hit(ctx, "undo", calls)
		require.NoError(t, err)
		cutsBefore := p.cuts.Load()
		for i := int64(1); i <= calls; i++ {
			p.Arm(1)
			r, hitErr := w.Hit(ctx, "k", 1000, 1)
			p.Arm(1)
			n, incErr := w.Inc(ctx, "inc", 2)
			p.Arm(1)
			lr, lErr := l.Hit(ctx, "k", 1)
			p.Arm(1)
			_, _, refundErr := w.Refund(ctx, "refund", 1)
			assert.ErrorIs(t, refundErr, ratedb.ErrUnavailable, "a refund is never resent, with or without DedupWindow")
			left, err := w.Get(ctx, "refund")
			require.NoError(t, err)
			assert.Equal(t, calls-i, left, "DedupWindow %v, call %d: refunded exactly once", dedup, i)
			p.Arm(1)
			_, lRefundErr := l.Refund(ctx, "refund", 1)
			assert.ErrorIs(t, lRefundErr, ratedb.ErrUnavailable, "a Layered refund is never resent either")
			lLeft, err := l.Get(ctx, "refund")
			require.NoError(t, err)
			assert.Equal(t, []int64{calls - i, calls - i}, lLeft, "DedupWindow %v, call %d: refunded exactly once in every tier", dedup, i)
			p.Arm(1)
			assert.ErrorIs(t, w.Undo(ctx, "undo", undone, 1), ratedb.ErrUnavailable, "an undo is never resent")
			left, err = w.Get(ctx, "undo")
			require.NoError(t, err)
			assert.Equal(t, calls-i, left, "DedupWindow %v, call %d: undone exactly once", dedup, i)
			p.Arm(1)
			assert.ErrorIs(t, l.Undo(ctx, "undo", lUndone, 1), ratedb.ErrUnavailable, "a Layered undo is never resent")
			lLeft, err = l.Get(ctx, "undo")
			require.NoError(t, err)
			assert.Equal(t, []int64{calls - i, calls - i}, lLeft, "DedupWindow %v, call %d: undone exactly once in every tier", dedup, i)
			if dedup == 0 {
				assert.ErrorIs(t, hitErr, ratedb.ErrUnavailable)
				assert.ErrorIs(t, incErr, ratedb.ErrUnavailable)
				assert.ErrorIs(t, lErr, ratedb.ErrUnavailable)
			} else {
				require.NoError(t, hitErr)
				require.NoError(t, incErr)
				require.NoError(t, lErr)
				assert.True(t, r.Allowed)
				assert.Equal(t, i, r.Count, "call %d: the retry returns the first execution's answer", i)
				assert.Equal(t, 2*i, n)
				assert.Equal(t, []int64{i, i}, []int64{lr.Tiers[0].Count, lr.Tiers[1].Count})
			}
			got, err := w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, i, got, "DedupWindow %v, call %d: counted exactly once", dedup, i)
		}
		assert.Equal(t, int64(7*calls), p.cuts.Load()-cutsBefore, "every armed reply was cut")
		n, err := w.Get(ctx, "inc")
		require.NoError(t, err)
		assert.Equal(t, int64(2*calls), n)
		counts, err := l.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, []int64{calls, calls}, counts)
	}

	// The control: the same script and arguments through go-redis's
	// Script.Run, which retries; the same fault counts twice.
	c := client()
	s, err := redisstore.New(c, &redisstore.Options{Prefix: newPrefix(), Clock: clock})
	require.NoError(t, err)
	w, err := s.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	keys, args := w.HitArgs("k", 1000, 1)
	require.NoError(t, redisstore.CountScript.Run(ctx, c, keys, args...).Err()) // loads it
	keys, args = w.HitArgs("k", 1000, 1)
	p.Arm(1)
	v, err := redisstore.CountScript.Run(ctx, c, keys, args...).Int64Slice()
	require.NoError(t, err)
	assert.Equal(t, int64(3), v[2], "the retried script counted the hit again")
}

// With DedupWindow, a retry of a counted call that would now be denied (its
// own hit filled the window) or overflow (its own Inc took the count to
// MaxCount) returns the first run's reply, as countScript's doc says:
// the call was allowed and counted once, and its caller must hear so.
func TestRetryOfACountedCallReturnsItsReplyWhenItWouldNowFail(t *testing.T) {
	srv := startServer(t)
	p := newProxy(t, srv.Addr(), "evalsha")
	c := redis.NewClient(&redis.Options{Addr: p.Addr()}) // MaxRetries: the default, 3
	t.Cleanup(func() { _ = c.Close() })
	now := time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC) // still: no window ends during the test
	s, err := redisstore.New(c, &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second, DedupWindow: 5 * time.Second,
		Clock: redisstore.LocalClock(func() time.Time { return now })})
	require.NoError(t, err)
	ctx := context.Background()
	w, err := s.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 1}, ratedb.Tier{Scale: time.Hour, Limit: 1})
	require.NoError(t, err)
	_, err = w.Hit(ctx, "warm-up", 1, 1) // loads the script, so that EVALSHA runs it
	require.NoError(t, err)
	_, err = w.Set(ctx, "inc", redisstore.MaxCount-5)
	require.NoError(t, err)

	cuts := p.cuts.Load()
	p.Arm(1)
	r, err := w.Hit(ctx, "k", 1, 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed, "a Window hit that filled its window, retried")
	assert.EqualValues(t, 1, r.Count)

	p.Arm(1)
	lr, err := l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	assert.True(t, lr.Allowed, "a Layered hit that filled its windows, retried")
	assert.Equal(t, []int64{1, 1}, []int64{lr.Tiers[0].Count, lr.Tiers[1].Count})

	p.Arm(1)
	n, err := w.Inc(ctx, "inc", 5)
	require.NoError(t, err, "an Inc that took the count to MaxCount, retried")
	assert.Equal(t, redisstore.MaxCount, n)
	require.Equal(t, int64(3), p.cuts.Load()-cuts, "every armed reply was cut")

	got, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.EqualValues(t, 1, got, "counted once")
	lgot, err := l.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1}, lgot, "counted once")
	got, err = w.Get(ctx, "inc")
	require.NoError(t, err)
	assert.Equal(t, redisstore.MaxCount, got, "counted once")
}
