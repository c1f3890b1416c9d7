package layout_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/fixture"
	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counts reads every window of the file at path.
func counts(t *testing.T, path string) (map[string]int64, int) {
	t.Helper()
	got, damaged := map[string]int64{}, 0
	require.NoError(t, layout.Read(path, time.Second, layout.Visitor{
		Window: func(k []byte, cs []record.Counter) error {
			got[string(k)] = cs[len(cs)-1].Count
			return nil
		},
		Damaged: func(error) error { damaged++; return nil },
	}))
	return got, damaged
}

// The reader reads a file of format ratedb/1 as it is, and the same windows
// once ratedb has migrated it.
func TestReadBothFormats(t *testing.T) {
	path := fixture.Format1(t)
	v1, damaged := counts(t, path)
	assert.Len(t, v1, 40)
	assert.Zero(t, damaged)
	n, err := layout.Count(path, time.Second)
	require.NoError(t, err)
	assert.Equal(t, int64(40), n, "a ratedb/1 file's count")

	now := time.UnixMilli(1_767_225_600_000)
	db, err := ratedb.Open(path, &ratedb.Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	v2, damaged := counts(t, path)
	assert.Equal(t, v1, v2)
	assert.Zero(t, damaged)
	n, err = layout.Count(path, time.Second)
	require.NoError(t, err)
	assert.Equal(t, int64(40), n, "a ratedb/2 file's count")
}

func TestReadRejectsForeignFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rate.db")
	require.NoError(t, os.WriteFile(path, []byte("not a database"), 0o600))
	err := layout.Read(path, time.Second, layout.Visitor{Window: func([]byte, []record.Counter) error { return nil }})
	assert.ErrorIs(t, err, layout.ErrFormat)
}

func TestReadLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rate.db")
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = w.Inc(context.Background(), "k", 1)
	require.NoError(t, err)
	err = layout.Read(path, 50*time.Millisecond, layout.Visitor{Window: func([]byte, []record.Counter) error { return nil }})
	assert.ErrorIs(t, err, layout.ErrInUse)
}
