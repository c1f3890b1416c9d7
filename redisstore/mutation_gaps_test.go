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
