package redisstore_test

import (
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRetryNotCountedTwice loses the reply to counting calls after Redis
// executed them (a proxy cuts the connection), so that go-redis, with its
// default MaxRetries, sends the script again: every call must count once.
// Without deduplication the same fault counts twice, which shows the fault
// really causes a retry.
func TestRetryNotCountedTwice(t *testing.T) {
	srv := startServer(t)
	p := newProxy(t, srv.Addr(), "evalsha")
	newStore := func(dedup time.Duration) *redisstore.Store {
		c := redis.NewClient(&redis.Options{Addr: p.Addr()}) // MaxRetries: the default, 3
		t.Cleanup(func() { _ = c.Close() })
		s, err := redisstore.New(c, &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second, DedupWindow: dedup})
		require.NoError(t, err)
		return s
	}
	s := newStore(0)
	w, err := s.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 1000}, ratedb.Tier{Scale: time.Hour, Limit: 1000})
	require.NoError(t, err)
	_, err = w.Get(ctx, "warm-up") // loads the scripts, so that EVALSHA runs them
	require.NoError(t, err)
	_, err = w.Hit(ctx, "warm-up", 1, 1)
	require.NoError(t, err)

	const calls = 20
	for i := int64(1); i <= calls; i++ {
		p.Arm(1)
		r, err := w.Hit(ctx, "k", 1000, 1)
		require.NoError(t, err)
		assert.True(t, r.Allowed)
		assert.Equal(t, i, r.Count, "call %d: the retry returns the first execution's answer", i)

		p.Arm(1)
		n, err := w.Inc(ctx, "inc", 2)
		require.NoError(t, err)
		assert.Equal(t, 2*i, n)

		p.Arm(1)
		lr, err := l.Hit(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, lr.Allowed)
		assert.Equal(t, i, lr.Tiers[0].Count)
		assert.Equal(t, i, lr.Tiers[1].Count)
	}
	assert.Equal(t, int64(3*calls), p.cuts.Load(), "every armed reply was cut")
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(calls), n, "no call counted twice")
	n, err = w.Get(ctx, "inc")
	require.NoError(t, err)
	assert.Equal(t, int64(2*calls), n)
	counts, err := l.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{calls, calls}, counts)

	// The control: deduplication off, the same fault, a double count.
	off := newStore(-1)
	w2, err := off.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	p.Arm(1)
	r, err := w2.Hit(ctx, "k", 1000, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Count, "without request ids the retried script counts again")
}
