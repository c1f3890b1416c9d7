package tools_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/tools"
	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A window is live until its end, not at it: at its end the next check
// opens a new window (found by mutation testing: c.End >= now in Inspect
// listed a window as live at the instant it ended, and no test failed).
func TestWindowEndingNowIsExpired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	t0 := time.Now()
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 16,
		Clock: func() time.Time { return t0 }})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = w.Inc(context.Background(), "k", 1)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	ws, _, err := tools.Inspect(path, "", t0)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Len(t, ws[0].Ends, 1)
	end, err := time.Parse(time.RFC3339Nano, ws[0].Ends[0])
	require.NoError(t, err)
	require.True(t, end.After(t0), "the window ends after it was counted in")

	for _, tc := range []struct {
		name string
		now  time.Time
		live bool
	}{
		{"a millisecond before its end", end.Add(-time.Millisecond), true},
		{"at its end", end, false},
	} {
		ws, sum, err := tools.Inspect(path, "", tc.now)
		require.NoError(t, err, tc.name)
		require.Len(t, ws, 1, tc.name)
		assert.Equal(t, tc.live, ws[0].Live, tc.name)
		live, expired := 0, 1
		if tc.live {
			live, expired = 1, 0
		}
		assert.Equal(t, live, sum.Live, tc.name)
		assert.Equal(t, expired, sum.Expired, tc.name)
	}
}

// craftedFile writes a state file at path holding one window of key "k"
// in a one-hour fixed window, then rewrites its block with edit applied to
// that window, under a valid checksum: a crafted file, as a file's
// checksums are no proof of who wrote it.
func craftedFile(t *testing.T, path string, edit func(w *record.BlockWindow)) {
	t.Helper()
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 16})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = w.Inc(context.Background(), "k", 1)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, bdb.Close()) }()
	require.NoError(t, bdb.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(layout.BucketBlocks)
		k, v := b.Cursor().First()
		require.NotNil(t, k)
		var blk record.Block
		require.NoError(t, record.DecodeBlock(&blk, k, v))
		require.Len(t, blk.Windows, 1)
		win := record.BlockWindow{
			Key:      append([]byte(nil), blk.Windows[0].Key...),
			Counters: append([]record.Counter(nil), blk.Windows[0].Counters...),
		}
		edit(&win)
		bk := append([]byte(nil), k...)
		return b.Put(bk, record.AppendBlock(nil, bk, []record.BlockWindow{win}))
	}))
}

// A window whose record key names one scale but which holds two counters
// (a crafted file: ratedb writes one counter a scale) is unreadable, not
// listed with a count that has no scale (found by mutation testing:
// without the check that the counters match the scales, Inspect listed it,
// and no test failed).
func TestInspectRefusesCountersThatDoNotMatchTheScales(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	craftedFile(t, path, func(w *record.BlockWindow) {
		w.Counters = append(w.Counters, w.Counters[0])
	})
	ws, sum, err := tools.Inspect(path, "", time.Now())
	require.NoError(t, err)
	assert.Empty(t, ws)
	assert.Equal(t, tools.Summary{Records: 1, Unreadable: 1, Format: sum.Format}, sum)
}

// A record key that is only a spec, with no counted key after it (a
// crafted file: ratedb refuses empty keys), is unreadable, not listed
// as the window of "" (found by mutation testing: len(k) < p+8*n in
// parseKey accepted it, and no test failed).
func TestInspectRefusesARecordKeyWithoutAKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	craftedFile(t, path, func(w *record.BlockWindow) {
		require.Equal(t, "k", string(w.Key[len(w.Key)-1:]))
		w.Key = w.Key[:len(w.Key)-1] // the spec: algorithm and scale
	})
	ws, sum, err := tools.Inspect(path, "", time.Now())
	require.NoError(t, err)
	assert.Empty(t, ws)
	assert.Equal(t, tools.Summary{Records: 1, Unreadable: 1, Format: sum.Format}, sum)
}
