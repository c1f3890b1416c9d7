package ratedb_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ErrInvalidArgument's doc: a call given a context that is already
// cancelled or past its deadline returns the context's error and changes
// nothing.
func TestEndedContext(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		db := openDB(t, path, testOptions(newClock()))
		w, err := db.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		l, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5})
		require.NoError(t, err)
		bg := context.Background()
		wr, err := w.Hit(bg, "u", 5, 2)
		require.NoError(t, err)
		lr, err := l.Hit(bg, "u", 2)
		require.NoError(t, err)
		inMemory := db.Stats().WindowsInMemory

		cancelled, cancel := context.WithCancel(bg)
		cancel()
		expired, cancel2 := context.WithDeadline(bg, time.Now().Add(-time.Second))
		defer cancel2()
		for want, ctx := range map[error]context.Context{context.Canceled: cancelled, context.DeadlineExceeded: expired} {
			calls := map[string]func() error{
				"Hit":           func() error { _, err := w.Hit(ctx, "u", 5, 1); return err },
				"Hit new key":   func() error { _, err := w.Hit(ctx, "new", 5, 1); return err },
				"Inc":           func() error { _, err := w.Inc(ctx, "u", 1); return err },
				"Set":           func() error { _, err := w.Set(ctx, "u", 0); return err },
				"Get":           func() error { _, err := w.Get(ctx, "u"); return err },
				"State":         func() error { _, _, err := w.State(ctx, "u"); return err },
				"Refund":        func() error { _, _, err := w.Refund(ctx, "u", 1); return err },
				"Undo":          func() error { return w.Undo(ctx, "u", wr, 1) },
				"Reset":         func() error { return w.Reset(ctx, "u") },
				"Layered.Hit":   func() error { _, err := l.Hit(ctx, "u", 1); return err },
				"Layered.Inc":   func() error { _, err := l.Inc(ctx, "new", 1); return err },
				"Layered.Get":   func() error { _, err := l.Get(ctx, "u"); return err },
				"Layered.Undo":  func() error { return l.Undo(ctx, "u", lr, 1) },
				"Layered.Reset": func() error { return l.Reset(ctx, "u") },
			}
			for name, call := range calls {
				assert.ErrorIs(t, call(), want, name)
			}
		}
		n, err := w.Get(bg, "u")
		require.NoError(t, err)
		assert.Equal(t, int64(2), n, "a call with an ended context changed the Window")
		counts, err := l.Get(bg, "u")
		require.NoError(t, err)
		assert.Equal(t, []int64{2}, counts, "a call with an ended context changed the Layered")
		assert.Equal(t, inMemory, db.Stats().WindowsInMemory, "a call with an ended context brought a key into memory")
	})
}
