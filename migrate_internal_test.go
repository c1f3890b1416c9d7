package ratedb

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/record"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A file written before Layered limiters were keyed by their sorted scales
// holds a (1h, 1m) limiter's records under that order's prefix: they move to
// the sorted prefix, counters reordered, when the limiter is first asked for.
func TestLayeredLegacyRecordsMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rate.db")
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1}
	db, err := Open(path, opts)
	require.NoError(t, err)
	old := specPrefix(FixedWindow, []int64{3_600_000, 60_000}, true)
	hourEnd, minuteEnd := now.UnixMilli()+3_600_000, now.UnixMilli()+60_000
	legacy := func(key string, hour, minute int64) {
		k := append(append([]byte(nil), old...), key...)
		cs := []counter{{Count: hour, End: hourEnd}, {Count: minute, End: minuteEnd}}
		db.snapMu.Lock()
		defer db.snapMu.Unlock()
		require.NoError(t, db.update(func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketWindows).Put(k, record.AppendValue(nil, k, cs)); err != nil {
				return err
			}
			if err := tx.Bucket(bucketIndex).Put(record.AppendIndexKey(nil, hourEnd, k), nil); err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(keyWindows, record.EncodeInt64(db.stats.diskWindows.Add(1)))
		}))
	}
	legacy("a", 7, 2)
	legacy("b", 5, 1)
	require.NoError(t, db.Close())

	db, err = Open(path, opts)
	require.NoError(t, err)
	defer db.Close()
	l, err := db.Layered(FixedWindow, Tier{Scale: time.Hour, Limit: 10}, Tier{Scale: time.Minute, Limit: 2})
	require.NoError(t, err)
	ctx := context.Background()
	got, err := l.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{7, 2}, got)
	sorted, err := db.Layered(FixedWindow, Tier{Scale: time.Minute, Limit: 2}, Tier{Scale: time.Hour, Limit: 10})
	require.NoError(t, err)
	got, err = sorted.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 5}, got)
	r, err := l.Hit(ctx, "a", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed, "the migrated minute tier is full")
	assert.Equal(t, int64(2), db.Stats().WindowsOnDisk)
	require.NoError(t, db.view(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketWindows).Cursor().Seek(old)
		assert.False(t, k != nil && string(k[:len(old)]) == string(old), "a legacy record is left")
		return nil
	}))
	require.NoError(t, db.Snapshot())
	require.NoError(t, db.Verify())
}
