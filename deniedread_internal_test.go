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
