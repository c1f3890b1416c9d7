package ratedb

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A hit whose increment exceeds its limit, on a key whose open window is
// only in the file, is denied with the window's count after one read of the
// file. deniedOutright read the window (peek) to learn that it is open, then
// acquire read it again to bring it into memory: two read transactions,
// two B+tree descents and two block checksums for every such hit of a key
// not in memory. bbolt's Stats.TxN counts the read transactions.
func TestHitDeniedOutrightReadsTheFileOnce(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	ctx := context.Background()
	db, w := openWindow(t, path, now)
	l, err := db.Layered(FixedWindow, Tier{Scale: time.Hour, Limit: 5}, Tier{Scale: time.Minute, Limit: 2})
	require.NoError(t, err)
	_, err = w.Hit(ctx, "k", 5, 2)
	require.NoError(t, err)
	_, err = l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	db, w = openWindow(t, path, now)
	defer db.Close()
	l, err = db.Layered(FixedWindow, Tier{Scale: time.Hour, Limit: 5}, Tier{Scale: time.Minute, Limit: 2})
	require.NoError(t, err)
	require.NoError(t, db.Snapshot()) // the audit after Open is done: nothing else reads the file
	require.Zero(t, db.Stats().WindowsInMemory)

	reads := db.bolt.Stats().TxN
	r, err := w.Hit(ctx, "k", 1, 3)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.Equal(t, int64(2), r.Count, "the count of the window in the file")
	assert.True(t, r.ResetAt.Equal(now.Truncate(time.Hour).Add(time.Hour)), r.ResetAt)
	assert.Equal(t, 1, db.bolt.Stats().TxN-reads, "read transactions of a Window hit denied outright")

	reads = db.bolt.Stats().TxN
	lr, err := l.Hit(ctx, "k", 3)
	require.NoError(t, err)
	assert.False(t, lr.Allowed)
	assert.Equal(t, []int64{1, 1}, []int64{lr.Tiers[0].Count, lr.Tiers[1].Count})
	assert.Equal(t, 1, db.bolt.Stats().TxN-reads, "read transactions of a Layered hit denied outright")

	// The windows came into memory once each, as before.
	st := db.Stats()
	assert.Equal(t, int64(2), st.WindowsInMemory)
	assert.Equal(t, int64(2), st.Reloaded)

	// Once in memory, the same hits read nothing.
	reads = db.bolt.Stats().TxN
	_, err = w.Hit(ctx, "k", 1, 3)
	require.NoError(t, err)
	_, err = l.Hit(ctx, "k", 3)
	require.NoError(t, err)
	assert.Equal(t, 0, db.bolt.Stats().TxN-reads)
}

// A hit denied outright on a key whose open window is only in the file,
// refused because the clock reads out of range once it acquires the key,
// leaves no window in memory and counts no reload, as before peek(keepOpen)
// brought the window in ahead of acquire: acquire removed the entry it had
// created, but not the one peek had created for it, which stayed in memory,
// cold and clean, until the janitor took it out at its window's end, and
// peek had counted it in Stats.Reloaded, which counts only what a call
// keeps (TestRefusedCallReloadsNothing).
func TestRefusedHitDeniedOutrightLeavesNoWindow(t *testing.T) {
	t0 := time.UnixMilli(1_767_225_600_000)
	ctx := context.Background()
	for _, layered := range []bool{false, true} {
		t.Run(map[bool]string{false: "window", true: "layered"}[layered], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rate.db")
			hit := func(db *DB, increment int64) error {
				if layered {
					l, err := db.Layered(FixedWindow, Tier{Scale: time.Hour, Limit: 5}, Tier{Scale: time.Minute, Limit: 2})
					require.NoError(t, err)
					_, err = l.Hit(ctx, "k", increment)
					return err
				}
				w, err := db.Window(FixedWindow, time.Hour)
				require.NoError(t, err)
				_, err = w.Hit(ctx, "k", 2, increment)
				return err
			}
			clk := &settableClock{t: t0}
			db, err := Open(path, &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
			require.NoError(t, err)
			require.NoError(t, hit(db, 1))
			require.NoError(t, db.Close())

			db, err = Open(path, &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
			require.NoError(t, err)
			defer db.Close()
			require.NoError(t, db.Snapshot()) // the audit after Open is done
			require.Zero(t, db.Stats().WindowsInMemory)
			setHook(t, func() { // after deniedOutright's look, as Hit acquires the key
				testBeforeAcquire = nil
				clk.Set(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
			})
			require.ErrorIs(t, hit(db, 3), ErrClockOutOfRange)
			assert.Zero(t, db.Stats().WindowsInMemory, "windows in memory after a refused hit")
			assert.Zero(t, db.Stats().Reloaded, "the refused hit kept nothing it read")

			// The window is still the file's, and a hit at a sound time
			// finds it.
			clk.Set(t0)
			require.NoError(t, hit(db, 1))
			assert.Equal(t, int64(1), db.Stats().WindowsInMemory)
			assert.Equal(t, int64(1), db.Stats().Reloaded)
		})
	}
}

// A Reset between a denied-outright Hit's look, which brought the key's
// window in from the file, and its acquire, counts no reload: the Reset's
// read of the file is not one (before peek(keepOpen) the Reset read the
// window itself and the Hit found it in memory, counting nothing), and the
// Hit finds the cleared window.
func TestResetAfterDeniedOutrightLookCountsNoReload(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	ctx := context.Background()
	db, w := openWindow(t, path, now)
	_, err := w.Hit(ctx, "k", 5, 2)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	db, w = openWindow(t, path, now)
	defer db.Close()
	require.NoError(t, db.Snapshot()) // the audit after Open is done
	setHook(t, func() {
		testBeforeAcquire = nil
		require.NoError(t, w.Reset(ctx, "k"))
	})
	r, err := w.Hit(ctx, "k", 1, 3)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.Zero(t, r.Count, "the count after the Reset")
	assert.Zero(t, db.Stats().Reloaded)
}
