package ratedb_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClockReadsPerCall pins Options.Clock's doc: a call on a key reads the
// injected clock once, or twice for a Refund, an Undo or a Hit whose
// increment exceeds its limit that finds the key's window open, and a
// janitor pass reads it once. (The doc said "called once per operation".)
func TestClockReadsPerCall(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		c := newClock()
		var reads atomic.Int64
		opts := testOptions(c)
		opts.Clock = func() time.Time { reads.Add(1); return c.Now() }
		db := openDB(t, path, opts)
		w, err := db.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		l, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5}, ratedb.Tier{Scale: time.Hour, Limit: 9})
		require.NoError(t, err)
		wr, err := w.Hit(ctx, "k", 5, 1)
		require.NoError(t, err)
		lr, err := l.Hit(ctx, "k", 1)
		require.NoError(t, err)

		cases := []struct {
			name string
			want int64
			call func() error
		}{
			{"Hit", 1, func() error { _, err := w.Hit(ctx, "k", 5, 1); return err }},
			{"Hit new key", 1, func() error { _, err := w.Hit(ctx, "new", 5, 1); return err }},
			{"Hit over the limit, open window", 2, func() error { _, err := w.Hit(ctx, "k", 5, 6); return err }},
			{"Hit over the limit, no window", 1, func() error { _, err := w.Hit(ctx, "none", 5, 6); return err }},
			{"Inc", 1, func() error { _, err := w.Inc(ctx, "k", 1); return err }},
			{"Get", 1, func() error { _, err := w.Get(ctx, "k"); return err }},
			{"State", 1, func() error { _, _, err := w.State(ctx, "k"); return err }},
			{"Set", 1, func() error { _, err := w.Set(ctx, "k", 1); return err }},
			{"Refund", 2, func() error { _, _, err := w.Refund(ctx, "k", 1); return err }},
			{"Refund, no window", 1, func() error { _, _, err := w.Refund(ctx, "none", 1); return err }},
			{"Undo", 2, func() error { return w.Undo(ctx, "k", wr, 1) }},
			{"Reset", 1, func() error { return w.Reset(ctx, "k") }},
			{"Layered.Hit", 1, func() error { _, err := l.Hit(ctx, "k", 1); return err }},
			{"Layered.Hit over the limit", 2, func() error { _, err := l.Hit(ctx, "k", 6); return err }},
			{"Layered.Inc", 1, func() error { _, err := l.Inc(ctx, "k", 1); return err }},
			{"Layered.State", 1, func() error { _, _, err := l.State(ctx, "k"); return err }},
			{"Layered.Refund", 2, func() error { _, err := l.Refund(ctx, "k", 1); return err }},
			{"Layered.Undo", 2, func() error { return l.Undo(ctx, "k", lr, 1) }},
			{"Layered.Reset", 1, func() error { return l.Reset(ctx, "k") }},
			{"Clean", 1, func() error { _, err := db.Clean(); return err }},
			{"Snapshot", 0, db.Snapshot},
		}
		for _, tc := range cases {
			before := reads.Load()
			require.NoError(t, tc.call(), tc.name)
			assert.Equal(t, tc.want, reads.Load()-before, tc.name)
		}
	})
}
