package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
)

// Options.OnTime receives the time by the Store's clock at which each
// call's script ran: the LocalClock's reading, or Redis's TIME with
// ServerClock (on this host, so within the call's own span of time).
func TestOnTimeReportsTheScriptsTime(t *testing.T) {
	srv := startServer(t)
	client := srv.Client(t, nil)
	ctx := context.Background()
	var mu sync.Mutex
	var got []time.Time
	onTime := func(at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, at)
	}
	take := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		g := got
		got = nil
		return g
	}

	fake := time.UnixMilli(1_700_000_000_123)
	s, err := redisstore.New(client, &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second,
		Clock: redisstore.LocalClock(func() time.Time { return fake }), OnTime: onTime})
	require.NoError(t, err)
	w, err := s.Window(ratedb.PerKeyWindow, time.Minute)
	require.NoError(t, err)
	l, err := s.Layered(ratedb.PerKeyWindow, ratedb.Tier{Scale: time.Minute, Limit: 5})
	require.NoError(t, err)
	r, err := w.Hit(ctx, "k", 1, 1)
	require.NoError(t, err)
	_, err = w.Hit(ctx, "k", 1, 1) // denied
	require.NoError(t, err)
	_, err = w.Inc(ctx, "k", 1)
	require.NoError(t, err)
	_, _, err = w.State(ctx, "k")
	require.NoError(t, err)
	_, _, err = w.Refund(ctx, "k", 1)
	require.NoError(t, err)
	require.NoError(t, w.Undo(ctx, "k", r, 1))
	_, err = l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	_, err = l.Get(ctx, "k")
	require.NoError(t, err)
	calls := take()
	require.Len(t, calls, 8, "one per call")
	for i, at := range calls {
		assert.Equal(t, fake.UnixMilli(), at.UnixMilli(), "call %d", i)
	}
	_, err = w.Set(ctx, "k", 0)
	require.NoError(t, err)
	require.NoError(t, w.Reset(ctx, "k"))
	assert.Empty(t, take(), "Set and Reset report no time")

	s, err = redisstore.New(client, &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second, OnTime: onTime})
	require.NoError(t, err)
	w, err = s.Window(ratedb.PerKeyWindow, time.Minute)
	require.NoError(t, err)
	before := time.Now().Truncate(time.Millisecond)
	r, err = w.Hit(ctx, "k", 1, 1)
	after := time.Now()
	require.NoError(t, err)
	calls = take()
	require.Len(t, calls, 1)
	assert.False(t, calls[0].Before(before) || calls[0].After(after), "Redis's TIME %v, not within the call [%v, %v]", calls[0], before, after)
	assert.True(t, r.ResetAt.Equal(calls[0].Add(time.Minute)), "a per-key window ends one scale after the script's time")
}
