package redisstore_test

// Tests added after mutation testing (TestGap...): each fails with one
// deliberate bug that the rest of the suite let through.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
)

// With LocalClock a counter key outlives its window's end by one scale (the
// largest tier's), for a Window (windowScript) and a Layered limiter
// (countScript) alike.
func TestGapLocalClockTTLSlack(t *testing.T) {
	srv := startServer(t)
	client := srv.Client(t, nil)
	// One minute before an hour ends: the window ends in 1 min.
	now := time.Date(2026, 1, 1, 10, 59, 0, 0, time.UTC)
	s, err := redisstore.New(client, &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second,
		Clock: redisstore.LocalClock(func() time.Time { return now })})
	require.NoError(t, err)
	ctx := context.Background()

	w, err := s.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = w.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	keys, _ := w.HitArgs("k", 10, 1)
	ttl, err := client.PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Hour, "window: end - now (1 min) + one scale (1 h)")

	l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5}, ratedb.Tier{Scale: time.Hour, Limit: 10})
	require.NoError(t, err)
	_, err = l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	keys, _ = l.HitArgs("k", 1)
	ttl, err = client.PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Hour, "layered: latest end - now (1 min) + the largest scale (1 h)")
}

// Set stores a window end capped at one scale after now, as every writing
// script does: after the clock stepped back, the window it sets ends within
// a scale.
func TestGapSetCapsTheStoredEnd(t *testing.T) {
	srv := startServer(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC).UnixMilli())
	s, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second,
		Clock: redisstore.LocalClock(func() time.Time { return time.UnixMilli(now.Load()) })})
	require.NoError(t, err)
	ctx := context.Background()
	w, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	_, err = w.Hit(ctx, "k", 10, 1) // window ends at 10:01:00
	require.NoError(t, err)
	now.Add(-(10 * time.Minute).Milliseconds()) // 09:50:30
	_, err = w.Set(ctx, "k", 3)                 // its window must end by 09:51:30
	require.NoError(t, err)
	now.Add((90 * time.Second).Milliseconds()) // 09:52:00
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.EqualValues(t, 0, n, "the window Set wrote has ended")
}

// With DedupWindow, a retry of a counted call that would now be denied (its
// own hit filled the window) or overflow (its own Inc took the count to
// MaxCount) returns the first run's reply, as countScript's doc says:
// the call was allowed and counted once, and its caller must hear so.
func TestGapRetryOfACountedCallReturnsItsReplyWhenItWouldNowFail(t *testing.T) {
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
