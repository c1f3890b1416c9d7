package ratedb

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// The last tests for gaps that mutation testing of the file safety code
// (Open's validation and the migration from ratedb/1) found: each fails
// with the deliberate bug it names.

// overflowPastTheEnd writes a sound file of a few hundred windows at path,
// then sets the overflow count of the page that pick chooses from its meta
// page (the root or the freelist) so that its last overflow page is the
// page count: one page past the file's last page. It returns the meta page.
func overflowPastTheEnd(t *testing.T, path string, pick func(bmeta) uint64) bmeta {
	t.Helper()
	fillFile(t, path, time.UnixMilli(1_767_225_600_000), 300)
	m, _, err := validateFile(path)
	require.NoError(t, err)
	id := pick(m)
	require.Less(t, id, m.pgid)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(m.pgid-id))
	_, err = f.WriteAt(hdr[:], int64(id)*int64(m.pageSize)+12)
	require.NoError(t, err)
	return m
}

// openRefused requires Open to refuse the file at path with ErrCorrupt.
func openRefused(t *testing.T, path, what string) {
	t.Helper()
	db, err := Open(path, &Options{SnapshotPeriod: -1, CleanPeriod: -1})
	if err == nil {
		db.Close()
	}
	require.ErrorIs(t, err, ErrCorrupt, "Open of a file whose %s", what)
}

// TestGapOpenRefusesRootOverflowPastTheFile: the root page's overflow
// pages must lie within the page count (bbolt frees them all when it
// rewrites the root, at the next commit): a root page whose last overflow
// page is the page count itself is refused by Open with ErrCorrupt.
// (Mutant: validateFile no longer checked m.root+overflow against m.pgid,
// or checked it with > instead of >=; the file then opened, and only the
// audit after Open found the damage.)
func TestGapOpenRefusesRootOverflowPastTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rate.db")
	overflowPastTheEnd(t, path, func(m bmeta) uint64 { return m.root })
	_, _, err := validateFile(path)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "bad root page")
	openRefused(t, path, "root page runs past its last page")
}

// TestGapOpenRefusesFreelistOverflowPastTheFile: the same bound on the
// freelist page's overflow pages. The file is longer than its page count
// (as a file bbolt grew ahead of its pages is), so that the freelist's
// ids, read over the claimed span, are all there and sound: only the bound
// refuses it. (Mutant: validateFile no longer checked
// m.freelist+overflow against m.pgid, or checked it with > instead of >=.)
func TestGapOpenRefusesFreelistOverflowPastTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rate.db")
	m := overflowPastTheEnd(t, path, func(m bmeta) uint64 {
		require.NotEqual(t, ^uint64(0), m.freelist, "ratedb writes a freelist")
		return m.freelist
	})
	ps := int64(m.pageSize)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	if need := (int64(m.pgid) + 1) * ps; fi.Size() < need {
		require.NoError(t, os.Truncate(path, need))
	}
	_, _, err = validateFile(path)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "bad freelist page")
	openRefused(t, path, "freelist page runs past its last page")
}

// metaKeys returns the keys of the meta bucket of the closed file at path.
func metaKeys(t *testing.T, path string) []string {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer bdb.Close()
	var keys []string
	require.NoError(t, bdb.View(func(tx *bolt.Tx) error {
		return tx.Bucket(layout.BucketMeta).ForEach(func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	}))
	slices.Sort(keys)
	return keys
}

// TestGapMigrationDropsTheLegacyMetaKeys: migrating a ratedb/1 file leaves
// its meta bucket holding the keys of ratedb/2 only: the format, the
// secret and the window count. The ratedb/1 window count ("windows") and
// expiry high-water mark ("hwm") mean nothing in the new format: left
// behind, they would describe windows the file no longer holds. (Mutant:
// the migration no longer deleted layout.LegacyKeyHWM.)
func TestGapMigrationDropsTheLegacyMetaKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"fixture", copyFixture},
		{"written here", func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "rate.db")
			end := fixtureBase.Add(time.Hour).UnixMilli()
			writeFormat1(t, path, map[string][]counter{
				string(specPrefix(FixedWindow, []int64{3_600_000}, false)) + "a": {{Count: 3, End: end}},
			}, nil)
			return path
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			before := metaKeys(t, path)
			require.Contains(t, before, string(layout.LegacyKeyHWM), "the ratedb/1 file has a high-water mark")
			require.Contains(t, before, string(layout.LegacyKeyWindows), "the ratedb/1 file has a window count")
			db, err := Open(path, &Options{Clock: func() time.Time { return fixtureBase }, SnapshotPeriod: -1, CleanPeriod: -1})
			require.NoError(t, err)
			require.NoError(t, db.Close())
			assert.Equal(t, []string{string(layout.KeyCount), string(layout.KeyFormat), string(layout.KeySecret)}, metaKeys(t, path))
		})
	}
}

// TestGapMigrationSortsALegacyKeyWithAnEmptyUserKey: a legacy Layered
// record whose key is its unsorted spec prefix alone (an empty user key,
// which only a crafted or damaged file holds) is moved to the sorted
// prefix like any other, counters reordered; the key "a" beside it too.
// (Mutant: legacyOrder's len(k) <= 2+8*n took a key with nothing after
// its scales for one too short to be Layered, and left the record under
// the unsorted prefix, where no limiter reads it.)
func TestGapMigrationSortsALegacyKeyWithAnEmptyUserKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rate.db")
	old := specPrefix(FixedWindow, []int64{3_600_000, 60_000}, true)
	sorted := specPrefix(FixedWindow, []int64{60_000, 3_600_000}, true)
	ms := fixtureBase.UnixMilli()
	hour, minute := counter{Count: 7, End: ms + 3_600_000}, counter{Count: 2, End: ms + 60_000}
	writeFormat1(t, path, map[string][]counter{
		string(old):       {hour, minute},
		string(old) + "a": {hour, minute},
	}, nil)
	db, err := Open(path, &Options{Clock: func() time.Time { return fixtureBase }, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	assert.Equal(t, int64(2), db.Stats().WindowsOnDisk)
	assert.Zero(t, db.Stats().CorruptSkipped)
	l, err := db.Layered(FixedWindow, Tier{Scale: time.Hour, Limit: 10}, Tier{Scale: time.Minute, Limit: 5})
	require.NoError(t, err)
	got, err := l.Get(context.Background(), "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{7, 2}, got)
	require.NoError(t, db.Verify())
	require.NoError(t, db.Close())

	windows := map[string][]counter{}
	require.NoError(t, layout.Read(path, time.Second, layout.Visitor{
		Window: func(k []byte, cs []record.Counter) error {
			windows[string(k)] = slices.Clone(cs)
			return nil
		},
		Damaged: func(err error) error { return err },
	}))
	assert.Equal(t, map[string][]counter{
		string(sorted):       {minute, hour},
		string(sorted) + "a": {minute, hour},
	}, windows)
}
