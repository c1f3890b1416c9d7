package ratedb

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/fixture"
	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// fixtureBase is the clock of the ratedb/1 fixture (see fixture.Format1).
var fixtureBase = time.UnixMilli(1_767_225_600_000)

// copyFixture copies the ratedb/1 fixture (see fixture.Format1) to a new
// file and returns its path.
func copyFixture(t *testing.T) string { return fixture.Format1(t) }

// fileState returns the format marker, the secret and whether the ratedb/1
// buckets are there, of the closed file at path.
func fileState(t *testing.T, path string) (format, secret string, legacy bool) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer bdb.Close()
	require.NoError(t, bdb.View(func(tx *bolt.Tx) error {
		mb := tx.Bucket(layout.BucketMeta)
		format, secret = string(mb.Get(layout.KeyFormat)), string(mb.Get(layout.KeySecret))
		legacy = tx.Bucket(layout.LegacyBucketWindows) != nil || tx.Bucket(layout.LegacyBucketIndex) != nil
		return nil
	}))
	return format, secret, legacy
}

// A file of format ratedb/1 is migrated on Open: every count, end and
// window survives, the janitor removes the expired ones, and a second Open
// finds format ratedb/2 and does not migrate again.
func TestMigrateFormat1Fixture(t *testing.T) {
	ctx := context.Background()
	path := copyFixture(t)
	now := fixtureBase.Add(10 * time.Second)
	// Options.Logger's doc: one Info line when Open migrates, never a key.
	var logs bytes.Buffer
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	check := func(db *DB, minuteLive bool) {
		t.Helper()
		hour, err := db.Window(FixedWindow, time.Hour)
		require.NoError(t, err)
		minute, err := db.Window(PerKeyWindow, time.Minute)
		require.NoError(t, err)
		day, err := db.Window(StaggeredWindow, 24*time.Hour)
		require.NoError(t, err)
		ly, err := db.Layered(FixedWindow, Tier{Scale: time.Minute, Limit: 100}, Tier{Scale: time.Hour, Limit: 1000})
		require.NoError(t, err)
		for i := range 10 {
			k := fmt.Sprintf("user-%02d", i)
			got, err := hour.Get(ctx, k)
			require.NoError(t, err)
			assert.Equal(t, int64(i+1), got, "hour %s", k)
			end, err := hour.ExpiresAt(ctx, k)
			require.NoError(t, err)
			assert.True(t, end.Equal(fixtureBase.Add(time.Hour)), "hour %s ends %v", k, end)
			got, err = day.Get(ctx, k)
			require.NoError(t, err)
			assert.Equal(t, int64(3*i+1), got, "day %s", k)
			got, err = minute.Get(ctx, k)
			require.NoError(t, err)
			lc, err := ly.Get(ctx, k)
			require.NoError(t, err)
			if minuteLive {
				assert.Equal(t, int64(2*i+1), got, "minute %s", k)
				assert.Equal(t, []int64{int64(i + 5), int64(i + 5)}, lc, "layered %s", k)
			} else {
				assert.Zero(t, got, "minute %s", k)
				assert.Equal(t, []int64{0, int64(i + 5)}, lc, "layered %s", k)
			}
		}
	}

	db, err := Open(path, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(40), db.Stats().WindowsOnDisk)
	assert.Zero(t, db.Stats().CorruptSkipped)
	check(db, true)
	require.NoError(t, db.Verify())
	require.NoError(t, db.Close())
	assert.Equal(t, 1, strings.Count(logs.String(), "\n"), "one log line: %s", logs.String())
	assert.Contains(t, logs.String(), `level=INFO msg="ratedb: migrated the file to format ratedb/2"`)
	assert.NotContains(t, logs.String(), "user-")
	logs.Reset()
	format, secret, legacy := fileState(t, path)
	assert.Equal(t, "ratedb/2", format)
	assert.Len(t, secret, layout.SecretLen)
	assert.False(t, legacy, "the ratedb/1 buckets are gone")

	// Half an hour later: the minute windows have expired.
	now = fixtureBase.Add(30 * time.Minute)
	db, err = Open(path, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(40), db.Stats().WindowsOnDisk)
	removed, err := db.Clean()
	require.NoError(t, err)
	assert.Equal(t, 10, removed, "the PerKeyWindow 1m windows")
	assert.Equal(t, int64(30), db.Stats().WindowsOnDisk)
	check(db, false)
	require.NoError(t, db.Verify())
	require.NoError(t, db.Close())
	format2, secret2, _ := fileState(t, path)
	assert.Equal(t, "ratedb/2", format2)
	assert.Equal(t, secret, secret2, "the second Open did not migrate again")
	assert.Empty(t, logs.String(), "nothing logged by the second Open")
}

// writeFormat1 writes a file of format ratedb/1 at path, as the code before
// issue 11 did: one record per window and an expiry index. bad lists the
// indices of records written with a damaged checksum.
func writeFormat1(t *testing.T, path string, recs map[string][]counter, bad map[string]bool) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, bdb.Update(func(tx *bolt.Tx) error {
		mb, err := tx.CreateBucket(layout.BucketMeta)
		require.NoError(t, err)
		wb, err := tx.CreateBucket(layout.LegacyBucketWindows)
		require.NoError(t, err)
		xb, err := tx.CreateBucket(layout.LegacyBucketIndex)
		require.NoError(t, err)
		require.NoError(t, mb.Put(layout.KeyFormat, layout.LegacyFormat))
		require.NoError(t, mb.Put(layout.LegacyKeyWindows, record.EncodeInt64(int64(len(recs)))))
		require.NoError(t, mb.Put(layout.LegacyKeyHWM, record.EncodeInt64(0)))
		for k, cs := range recs {
			v := record.AppendValue(nil, []byte(k), cs)
			if bad[k] {
				v[3] ^= 0x40
			}
			require.NoError(t, wb.Put([]byte(k), v))
			require.NoError(t, xb.Put(record.AppendIndexKey(nil, record.MaxEnd(cs), []byte(k)), nil))
		}
		return nil
	}))
	require.NoError(t, bdb.Close())
}

// A larger ratedb/1 file (10,000 windows, a few damaged records) migrates in
// one Open: every sound window keeps its count, the damaged ones are counted
// and dropped.
func TestMigrateFormat1Large(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rate.db")
	prefix := specPrefix(FixedWindow, []int64{3_600_000}, false)
	end := fixtureBase.Add(time.Hour).UnixMilli()
	recs, bad := map[string][]counter{}, map[string]bool{}
	for i := range 10_000 {
		k := string(prefix) + fmt.Sprintf("key-%05d", i)
		recs[k] = []counter{{Count: int64(1 + i%100), End: end}}
		if i%1000 == 7 {
			bad[k] = true
		}
	}
	writeFormat1(t, path, recs, bad)
	db, err := Open(path, &Options{Clock: func() time.Time { return fixtureBase }, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	st := db.Stats()
	assert.Equal(t, int64(10_000-len(bad)), st.WindowsOnDisk)
	assert.Equal(t, int64(len(bad)), st.CorruptSkipped)
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	for i := range 10_000 {
		got, err := w.Get(ctx, fmt.Sprintf("key-%05d", i))
		require.NoError(t, err)
		want := int64(1 + i%100)
		if i%1000 == 7 {
			want = 0
		}
		require.Equal(t, want, got, "key %d", i)
	}
	require.NoError(t, db.Verify())
}

// A file written before Layered limiters were keyed by their sorted scales
// holds a (1h, 1m) limiter's records under that order's prefix: the
// migration moves them to the sorted prefix, counters reordered; a key that
// has records under both keeps the sorted one.
func TestLayeredLegacyRecordsMigrate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rate.db")
	now := fixtureBase
	old := specPrefix(FixedWindow, []int64{3_600_000, 60_000}, true)
	sorted := specPrefix(FixedWindow, []int64{60_000, 3_600_000}, true)
	hourEnd, minuteEnd := now.UnixMilli()+3_600_000, now.UnixMilli()+60_000
	writeFormat1(t, path, map[string][]counter{
		string(old) + "a":    {{Count: 7, End: hourEnd}, {Count: 2, End: minuteEnd}},
		string(old) + "b":    {{Count: 5, End: hourEnd}, {Count: 1, End: minuteEnd}},
		string(old) + "c":    {{Count: 9, End: hourEnd}, {Count: 9, End: minuteEnd}},
		string(sorted) + "c": {{Count: 1, End: minuteEnd}, {Count: 3, End: hourEnd}},
	}, nil)
	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	// Open moved them, before any limiter is asked for (the README said
	// "the first time each order is asked for").
	var keys []string
	require.NoError(t, db.view(func(tx *bolt.Tx) error {
		return tx.Bucket(layout.BucketBlocks).ForEach(func(k, v []byte) error {
			var b record.Block
			if err := record.DecodeBlock(&b, k, v); err != nil {
				return err
			}
			for _, w := range b.Windows {
				keys = append(keys, string(w.Key))
			}
			return nil
		})
	}))
	assert.ElementsMatch(t, []string{string(sorted) + "a", string(sorted) + "b", string(sorted) + "c"}, keys,
		"the file holds the records under the sorted scales right after Open")
	l, err := db.Layered(FixedWindow, Tier{Scale: time.Hour, Limit: 10}, Tier{Scale: time.Minute, Limit: 2})
	require.NoError(t, err)
	got, err := l.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{7, 2}, got)
	got, err = l.Get(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 1}, got, "the sorted record wins")
	s, err := db.Layered(FixedWindow, Tier{Scale: time.Minute, Limit: 2}, Tier{Scale: time.Hour, Limit: 10})
	require.NoError(t, err)
	got, err = s.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 5}, got)
	r, err := l.Hit(ctx, "a", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed, "the migrated minute tier is full")
	assert.Equal(t, int64(3), db.Stats().WindowsOnDisk)
	require.NoError(t, db.Snapshot())
	require.NoError(t, db.Verify())
}

// A ratedb/1 record of a Layered limiter keyed by its unsorted scales whose
// counters, under a sound checksum, do not match those scales (crafted, or
// damaged and re-checksummed) is dropped and counted like a record that
// fails its checksum: the rest of the file migrates and Open succeeds. (It
// made the migration index past the scales, a panic that failed Open with
// ErrCorrupt, or, with CorruptMoveAside, lost the whole file.)
func TestMigrateFormat1SkipsMismatchedTiers(t *testing.T) {
	ctx := context.Background()
	now := fixtureBase
	old := specPrefix(FixedWindow, []int64{3_600_000, 60_000}, true)
	hourEnd, minuteEnd := now.UnixMilli()+3_600_000, now.UnixMilli()+60_000
	for _, tc := range []struct {
		name string
		bad  string
		cs   []counter
	}{
		{"more counters than scales", string(old) + "x",
			[]counter{{Count: 1, End: hourEnd}, {Count: 1, End: minuteEnd}, {Count: 1, End: minuteEnd}}},
		{"fewer counters than scales", string(old) + "x", []counter{{Count: 1, End: hourEnd}}},
		{"more scales than a record holds",
			string(specPrefix(FixedWindow, []int64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, true)) + "x",
			[]counter{{Count: 1, End: hourEnd}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rate.db")
			writeFormat1(t, path, map[string][]counter{
				string(old) + "a": {{Count: 7, End: hourEnd}, {Count: 2, End: minuteEnd}},
				tc.bad:            tc.cs,
			}, nil)
			db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1})
			require.NoError(t, err)
			defer db.Close()
			assert.Equal(t, int64(1), db.Stats().CorruptSkipped)
			assert.Equal(t, int64(1), db.Stats().WindowsOnDisk)
			l, err := db.Layered(FixedWindow, Tier{Scale: time.Hour, Limit: 10}, Tier{Scale: time.Minute, Limit: 2})
			require.NoError(t, err)
			got, err := l.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, []int64{7, 2}, got)
			got, err = l.Get(ctx, "x")
			require.NoError(t, err)
			assert.Equal(t, []int64{0, 0}, got)
			require.NoError(t, db.Verify())
		})
	}
}

// A file marked ratedb/1 that lacks its windows bucket, or also has a
// blocks bucket (damaged, or written by something else), is not a ratedb
// file Open can migrate: ErrCorrupt, which Options.OnCorrupt's
// CorruptMoveAside then moves aside. One that lacks only its expiry index,
// which the migration drops anyway, migrates. (Each made Open fail with
// bbolt's "bucket not found" or "bucket already exists", not ErrCorrupt,
// so CorruptMoveAside never applied; found by FuzzOpenFile.)
func TestMigrateFormat1MissingBuckets(t *testing.T) {
	ctx := context.Background()
	now := fixtureBase
	key := append(specPrefix(FixedWindow, []int64{3_600_000}, false), "a"...)
	hourEnd := now.UnixMilli() + 3_600_000
	for _, tc := range []struct {
		name    string
		change  func(tx *bolt.Tx) error
		corrupt bool
	}{
		{"no index bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(layout.LegacyBucketIndex) }, false},
		{"no windows bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(layout.LegacyBucketWindows) }, true},
		{"a blocks bucket", func(tx *bolt.Tx) error { _, err := tx.CreateBucket(layout.BucketBlocks); return err }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rate.db")
			writeFormat1(t, path, map[string][]counter{string(key): {{Count: 7, End: hourEnd}}}, nil)
			bdb, err := bolt.Open(path, 0o600, nil)
			require.NoError(t, err)
			require.NoError(t, bdb.Update(tc.change))
			require.NoError(t, bdb.Close())
			opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1,
				Logger: slog.New(slog.DiscardHandler)}
			db, err := Open(path, opts)
			if tc.corrupt {
				require.ErrorIs(t, err, ErrCorrupt)
				opts.OnCorrupt = CorruptMoveAside
				db, err = Open(path, opts)
				require.NoError(t, err, "moved aside, started empty")
				defer db.Close()
				assert.Zero(t, db.Stats().WindowsOnDisk)
				aside, _ := filepath.Glob(path + ".corrupt-*")
				assert.Len(t, aside, 1)
				return
			}
			require.NoError(t, err)
			defer db.Close()
			w, err := db.Window(FixedWindow, time.Hour)
			require.NoError(t, err)
			got, err := w.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, int64(7), got)
			require.NoError(t, db.Verify())
		})
	}
}

// A legacy Layered record of three tiers whose order is a 3-cycle of the
// sorted one (day, minute, hour): the migration must put given tier i's
// counter at pos[i]. Two tiers cannot tell pos from its inverse (a swap is
// its own inverse).
func TestLayeredLegacyRecordsMigrateThreeTiers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rate.db")
	now := fixtureBase
	const m, h, d = 60_000, 3_600_000, 86_400_000
	old := specPrefix(FixedWindow, []int64{d, m, h}, true)
	ms := now.UnixMilli()
	writeFormat1(t, path, map[string][]counter{
		string(old) + "a": {{Count: 30, End: ms + d}, {Count: 1, End: ms + m}, {Count: 5, End: ms + h}},
	}, nil)
	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	l, err := db.Layered(FixedWindow, Tier{Scale: 24 * time.Hour, Limit: 100}, Tier{Scale: time.Minute, Limit: 10}, Tier{Scale: time.Hour, Limit: 50})
	require.NoError(t, err)
	got, err := l.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{30, 1, 5}, got)
	ends, err := l.ExpiresAt(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{ms + d, ms + m, ms + h}, []int64{ends[0].UnixMilli(), ends[1].UnixMilli(), ends[2].UnixMilli()})
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

// TestMigrationDropsTheLegacyMetaKeys: migrating a ratedb/1 file leaves
// its meta bucket holding the keys of ratedb/2 only: the format, the
// secret and the window count. The ratedb/1 window count ("windows") and
// expiry high-water mark ("hwm") mean nothing in the new format: left
// behind, they would describe windows the file no longer holds. (Mutant:
// the migration no longer deleted layout.LegacyKeyHWM.)
func TestMigrationDropsTheLegacyMetaKeys(t *testing.T) {
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

// TestMigrationSortsALegacyKeyWithAnEmptyUserKey: a legacy Layered
// record whose key is its unsorted spec prefix alone (an empty user key,
// which only a crafted or damaged file holds) is moved to the sorted
// prefix like any other, counters reordered; the key "a" beside it too.
// (Mutant: legacyOrder's len(k) <= 2+8*n took a key with nothing after
// its scales for one too short to be Layered, and left the record under
// the unsorted prefix, where no limiter reads it.)
func TestMigrationSortsALegacyKeyWithAnEmptyUserKey(t *testing.T) {
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
