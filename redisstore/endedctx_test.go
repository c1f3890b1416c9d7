package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The package doc: a call whose ctx has already ended is not sent and
// returns the context's error alone, as the embedded DB does, not
// ErrUnavailable (a caller that fails open on ErrUnavailable must not take
// a caller's own cancellation for an outage).
func TestEndedContextIsNotUnavailable(t *testing.T) {
	srv := startServer(t)
	client := srv.Client(t, nil)
	prefix := newPrefix()
	st, err := redisstore.New(client, &redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	w, err := st.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	l, err := st.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5})
	require.NoError(t, err)
	allowed, err := w.Hit(context.Background(), "u", 5, 1)
	require.NoError(t, err)
	lAllowed, err := l.Hit(context.Background(), "u", 1)
	require.NoError(t, err)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for want, ctx := range map[error]context.Context{context.Canceled: cancelled, context.DeadlineExceeded: expired} {
		calls := map[string]func() error{
			"Hit":           func() error { _, err := w.Hit(ctx, "k", 5, 1); return err },
			"Inc":           func() error { _, err := w.Inc(ctx, "k", 1); return err },
			"Set":           func() error { _, err := w.Set(ctx, "k", 1); return err },
			"Get":           func() error { _, err := w.Get(ctx, "k"); return err },
			"State":         func() error { _, _, err := w.State(ctx, "k"); return err },
			"Refund":        func() error { _, _, err := w.Refund(ctx, "u", 1); return err },
			"Undo":          func() error { return w.Undo(ctx, "u", allowed, 1) },
			"Reset":         func() error { return w.Reset(ctx, "u") },
			"Layered.Hit":   func() error { _, err := l.Hit(ctx, "k", 1); return err },
			"Layered.Inc":   func() error { _, err := l.Inc(ctx, "k", 1); return err },
			"Layered.Undo":  func() error { return l.Undo(ctx, "u", lAllowed, 1) },
			"Layered.Reset": func() error { return l.Reset(ctx, "u") },
		}
		for name, call := range calls {
			err := call()
			assert.ErrorIs(t, err, want, name)
			assert.False(t, errors.Is(err, ratedb.ErrUnavailable), "%s: %v matches ErrUnavailable", name, err)
		}
	}
	// Nothing was sent: "k" has no key, "u" keeps its counts.
	n, err := w.Get(context.Background(), "k")
	require.NoError(t, err)
	assert.Zero(t, n)
	n, err = w.Get(context.Background(), "u")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	counts, err := l.Get(context.Background(), "u")
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, counts)
}
