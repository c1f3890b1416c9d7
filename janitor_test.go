package ratedb_test

import (
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bug 6 of issue 9: with KeyOlderThan, a window ending at E must leave
// memory and file by the first pass at or after E+KeyOlderThan, and count
// once in Cleaned. Before the fix, a pass that looked at the entry early
// filed it again at max(end, now)+KeyOlderThan, so it stayed in memory until
// about E+2*KeyOlderThan, while the file side removed it on time and both
// counted it.
func TestKeyOlderThanRemovesOnTimeAndOnce(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		c := newClock()
		opts := testOptions(c)
		opts.KeyOlderThan = 90 * time.Second
		db := openDB(t, path, opts)
		w, err := db.Window(ratedb.FixedWindow, 1500*time.Millisecond)
		require.NoError(t, err)
		c.Advance(500 * time.Millisecond)
		// Two hits: a window's second use puts it in the cache, so that it
		// stays in memory after the snapshot.
		_, err = w.Hit(ctx, "k", 10, 1)
		require.NoError(t, err)
		r, err := w.Hit(ctx, "k", 10, 1)
		require.NoError(t, err)
		end := r.ResetAt
		require.True(t, end.Equal(epoch.Add(1500*time.Millisecond)))
		require.NoError(t, db.Snapshot())

		for _, early := range []time.Duration{10 * time.Second, 90*time.Second - 300*time.Millisecond, 90*time.Second - time.Millisecond} {
			c.Set(end.Add(early))
			removed, err := db.Clean()
			require.NoError(t, err)
			assert.Zero(t, removed, "pass at end+%v", early)
			assert.Equal(t, int64(1), db.Stats().WindowsInMemory, "pass at end+%v", early)
		}
		c.Set(end.Add(90 * time.Second))
		removed, err := db.Clean()
		require.NoError(t, err)
		assert.Equal(t, 1, removed)
		st := db.Stats()
		assert.Zero(t, st.WindowsInMemory, "still in memory after the pass at end+KeyOlderThan")
		assert.Zero(t, st.WindowsOnDisk)
		assert.Equal(t, int64(1), st.Cleaned)

		c.Set(end.Add(3 * time.Minute))
		removed, err = db.Clean()
		require.NoError(t, err)
		assert.Zero(t, removed)
		assert.Equal(t, int64(1), db.Stats().Cleaned, "the window was counted twice")
	})
}
