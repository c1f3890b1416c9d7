package ratedb

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/ratedb/ratedb/internal/siphash"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// changeSet.sort orders as changeSet.compare does, at every size and with
// hashes that share their top bits or are equal.
func TestSortChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		n    int
		h    func(i int) uint64
	}{
		{"small", 1000, func(int) uint64 { return rng.Uint64() }},
		{"insertion only", insertionMax, func(int) uint64 { return uint64(rng.IntN(4)) }},
		{"insertion runs with equal hashes", 80_000, func(int) uint64 { return uint64(rng.IntN(2000))<<48 | uint64(rng.IntN(3)) }},
		{"radix threshold", radixMin, func(int) uint64 { return rng.Uint64() }},
		{"large", 300_000, func(int) uint64 { return rng.Uint64() }},
		{"one bucket", 100_000, func(int) uint64 { return 0xabcd<<48 | rng.Uint64()>>20 }},
		{"equal hashes", 100_000, func(i int) uint64 { return uint64(i%7) << 60 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var set changeSet
			for i := range tc.n {
				c := set.add(siphash.Key{}, nil, fmt.Sprint("k", rng.IntN(tc.n)), nil)
				c.h, c.e = tc.h(i), new(entry)
			}
			want := slices.Clone(set.changes)
			slices.SortStableFunc(want, func(a, b change) int { return set.compare(&a, &b) })
			set.sort()
			for i := range want {
				a, b := &set.changes[i], &want[i]
				if set.compare(a, b) != 0 {
					t.Fatalf("position %d: h %x key %q, want h %x key %q", i, a.h, set.key(a), b.h, set.key(b))
				}
			}
			// The scratch space keeps no entry alive.
			for i := range set.tmp[:cap(set.tmp)] {
				if set.tmp[i] != (change{}) {
					t.Fatalf("scratch slot %d not cleared", i)
				}
			}
		})
	}
}

// With blocks of a few windows, random increments and resets across many
// snapshots split blocks, empty and delete them, and move windows into the
// first block: after every snapshot the file verifies and holds exactly the
// live windows; after a reopen every count reads back; once they expire,
// one janitor pass removes every one.
func TestBlocksSplitAndEmpty(t *testing.T) {
	defer SetMaxBlockBytes(160)() // about six windows
	ctx := context.Background()
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 64}
	path := filepath.Join(t.TempDir(), "rate.db")
	db, err := Open(path, opts)
	require.NoError(t, err)
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[string]int64{}
	const keys = 1500
	firstKeys := map[uint64]bool{}
	for round := range 40 {
		for range 300 {
			k := fmt.Sprint("key-", rng.IntN(keys))
			if rng.IntN(10) < 3 {
				require.NoError(t, w.Reset(ctx, k))
				delete(model, k)
				continue
			}
			n := int64(1 + rng.IntN(3))
			_, err := w.Inc(ctx, k, n)
			require.NoError(t, err)
			model[k] += n
		}
		require.NoError(t, db.Snapshot(), "round %d", round)
		require.NoError(t, db.Verify(), "round %d", round)
		require.Equal(t, int64(len(model)), db.Stats().WindowsOnDisk, "round %d", round)
		db.snapMu.Lock()
		var sum int64
		first := uint64(math.MaxUint64)
		for k, bi := range db.blocks {
			sum += bi.n
			first = min(first, k)
		}
		db.snapMu.Unlock()
		require.Equal(t, int64(len(model)), sum, "round %d: the block index", round)
		firstKeys[first] = true
		if round%10 != 5 {
			continue
		}
		// Empty the first block: the next one becomes first; its windows,
		// hit again, go back into a first block.
		var inFirst []string
		require.NoError(t, db.view(func(tx *bolt.Tx) error {
			k, v := tx.Bucket(layout.BucketBlocks).Cursor().First()
			var b record.Block
			require.NoError(t, record.DecodeBlock(&b, k, v))
			for _, w := range b.Windows {
				inFirst = append(inFirst, string(w.Key[9:]))
			}
			return nil
		}))
		for _, k := range inFirst {
			require.NoError(t, w.Reset(ctx, k))
			delete(model, k)
		}
		require.NoError(t, db.Snapshot())
		require.NoError(t, db.Verify())
		require.NoError(t, db.view(func(tx *bolt.Tx) error {
			k, _ := tx.Bucket(layout.BucketBlocks).Cursor().First()
			assert.NotEqual(t, uint64(0), layout.KeyH(k), "the emptied first block is gone")
			firstKeys[layout.KeyH(k)] = true
			return nil
		}))
		for _, k := range inFirst {
			_, err := w.Inc(ctx, k, 1)
			require.NoError(t, err)
			model[k]++
		}
	}
	require.NoError(t, db.Close())
	assert.Greater(t, len(firstKeys), 2, "the first block changed")
	assert.True(t, firstKeys[0], "windows moved back into a first block under key 0")

	db, err = Open(path, opts)
	require.NoError(t, err)
	defer db.Close()
	w, err = db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	for i := range keys {
		k := fmt.Sprint("key-", i)
		got, err := w.Get(ctx, k)
		require.NoError(t, err)
		require.Equal(t, model[k], got, k)
	}
	require.NoError(t, db.Snapshot()) // waits for the audit's block index
	now = now.Add(2 * time.Hour)
	removed, err := db.Clean()
	require.NoError(t, err)
	assert.Equal(t, len(model), removed)
	assert.Zero(t, db.Stats().WindowsOnDisk)
	require.NoError(t, db.Verify())
}

// Once a flood's windows expire, the janitor merges the blocks they left
// nearly empty: the live windows, scattered over the flood's blocks, end up
// packed again (without the merge, nearly every one would keep a block of
// its own, and a snapshot would rewrite a block per changed window). Every
// count stays exact, in memory and after a reopen, and the file verifies.
func TestJanitorMergesBlocksAFloodLeft(t *testing.T) {
	defer SetMaxBlockBytes(160)() // about six windows
	ctx := context.Background()
	const floodKeys, liveKeys = 3000, 150
	db, path, opts, clock := openFlooded(t, floodKeys, liveKeys, func(i int) int64 { return int64(1 + i%5) })
	live, err := db.Window(PerKeyWindow, 24*time.Hour)
	require.NoError(t, err)
	require.NoError(t, db.Snapshot())
	blocks := func() (n int, windows int64) {
		db.snapMu.Lock()
		defer db.snapMu.Unlock()
		for _, bi := range db.blocks {
			windows += bi.n
		}
		return len(db.blocks), windows
	}
	before, _ := blocks()
	require.Greater(t, before, floodKeys/6, "the flood filled many blocks")
	// The blocks holding a live window: what would remain without merging.
	holding := map[uint64]bool{}
	require.NoError(t, db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(layout.BucketBlocks).Cursor()
		var b record.Block
		for k, v := c.First(); k != nil; k, v = c.Next() {
			require.NoError(t, record.DecodeBlock(&b, k, v))
			for _, win := range b.Windows {
				if strings.Contains(string(win.Key), "live-") {
					holding[layout.KeyH(k)] = true
				}
			}
		}
		return nil
	}))
	require.Greater(t, len(holding), liveKeys*3/4, "the live windows are scattered")

	clock.Set(clock.Now().Add(2 * time.Minute))
	removed, err := db.Clean()
	require.NoError(t, err)
	assert.Equal(t, floodKeys, removed)
	require.NoError(t, db.Verify())
	after, windows := blocks()
	t.Logf("blocks: %d after the flood, %d held a live window, %d after the janitor's pass", before, len(holding), after)
	assert.Equal(t, int64(liveKeys), windows, "the block index counts the live windows")
	assert.Equal(t, int64(liveKeys), db.Stats().WindowsOnDisk)
	assert.LessOrEqual(t, after, liveKeys/2, "the small blocks were merged (%d blocks held a live window)", len(holding))
	require.NoError(t, db.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(layout.BucketBlocks).Cursor()
		n := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			assert.LessOrEqual(t, len(v), maxBlockBytes(), "block %x", k)
			n++
		}
		assert.Equal(t, after, n, "the block index matches the file")
		return nil
	}))

	check := func(db *DB, round int64) {
		t.Helper()
		live, err := db.Window(PerKeyWindow, 24*time.Hour)
		require.NoError(t, err)
		flood, err := db.Window(FixedWindow, time.Minute)
		require.NoError(t, err)
		for i := range liveKeys {
			got, err := live.Get(ctx, fmt.Sprint("live-", i))
			require.NoError(t, err)
			require.Equal(t, round*int64(1+i%5), got, "live-%d", i)
		}
		for i := range floodKeys {
			got, err := flood.Get(ctx, fmt.Sprint("flood-", i))
			require.NoError(t, err)
			require.Zero(t, got, "flood-%d", i)
		}
	}
	check(db, 1)
	// The merged blocks take the next snapshot's changes.
	for i := range liveKeys {
		_, err := live.Inc(ctx, fmt.Sprint("live-", i), int64(1+i%5))
		require.NoError(t, err)
	}
	require.NoError(t, db.Snapshot())
	require.NoError(t, db.Verify())
	require.NoError(t, db.Close())
	db, err = Open(path, opts)
	require.NoError(t, err)
	defer db.Close()
	check(db, 2)
	require.NoError(t, db.Verify())
}

// A damaged block is never absorbed by the small block before it: the
// janitor deletes it as damaged (counted in Stats.CorruptSkipped), its
// windows read as new, and every other live window keeps its count.
func TestJanitorDoesNotAbsorbADamagedBlock(t *testing.T) {
	defer SetMaxBlockBytes(200)()
	ctx := context.Background()
	const floodKeys, liveKeys = 600, 60
	db, path, opts, clock := openFlooded(t, floodKeys, liveKeys, func(int) int64 { return 3 })
	require.NoError(t, db.Close())

	// Damage the second block that holds a live window: the first, left
	// small by the pass, absorbs the flood's blocks after it until it
	// meets the damaged one.
	db, err := Open(path, opts)
	require.NoError(t, err)
	lost := map[string]bool{}
	require.NoError(t, db.update(func(tx *bolt.Tx) error {
		c := tx.Bucket(layout.BucketBlocks).Cursor()
		var b record.Block
		holding := 0
		for k, v := c.First(); k != nil; k, v = c.Next() {
			require.NoError(t, record.DecodeBlock(&b, k, v))
			for _, win := range b.Windows {
				if strings.Contains(string(win.Key), "live-") {
					holding++
					break
				}
			}
			if holding < 2 {
				continue
			}
			for _, win := range b.Windows {
				if key := string(win.Key); strings.Contains(key, "live-") {
					lost[key[strings.Index(key, "live-"):]] = true
				}
			}
			damaged := append([]byte(nil), v...)
			damaged[len(damaged)/2] ^= 0x5a
			return tx.Bucket(layout.BucketBlocks).Put(append([]byte(nil), k...), damaged)
		}
		t.Fatal("no block to damage")
		return nil
	}))
	require.NoError(t, db.Close())

	db, err = Open(path, opts) // the audit files the damaged block as due
	require.NoError(t, err)
	defer db.Close()
	require.NoError(t, db.Snapshot()) // waits for the audit's block index
	clock.Set(clock.Now().Add(2 * time.Minute))
	_, err = db.Clean()
	require.NoError(t, err)
	require.NoError(t, db.Verify(), "the damaged block is gone")
	assert.GreaterOrEqual(t, db.Stats().CorruptSkipped, int64(1))
	require.NotEmpty(t, lost)
	assert.Equal(t, int64(liveKeys-len(lost)), db.Stats().WindowsOnDisk, "the damaged block's windows left the count")
	live, err := db.Window(PerKeyWindow, 24*time.Hour)
	require.NoError(t, err)
	for i := range liveKeys {
		k := fmt.Sprint("live-", i)
		want := int64(3)
		if lost[k] {
			want = 0
		}
		got, err := live.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, want, got, k)
	}
	blocks := 0
	db.snapMu.Lock()
	for range db.blocks {
		blocks++
	}
	db.snapMu.Unlock()
	assert.Less(t, blocks, liveKeys/2, "the sound small blocks were merged")
}

// openFlooded opens a DB in a new file, with a fake clock and no
// background work, and counts floodKeys keys once each in a one-minute
// FixedWindow (a flood) and liveKeys keys, live-i counted liveCount(i), in
// a day-long PerKeyWindow.
func openFlooded(t *testing.T, floodKeys, liveKeys int, liveCount func(i int) int64) (db *DB, path string, opts *Options, clock *settableClock) {
	t.Helper()
	ctx := context.Background()
	clock = &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	opts = &Options{Clock: clock.Now, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 64}
	path = filepath.Join(t.TempDir(), "rate.db")
	db, err := Open(path, opts)
	require.NoError(t, err)
	flood, err := db.Window(FixedWindow, time.Minute)
	require.NoError(t, err)
	live, err := db.Window(PerKeyWindow, 24*time.Hour)
	require.NoError(t, err)
	for i := range floodKeys {
		_, err := flood.Inc(ctx, fmt.Sprint("flood-", i), 1)
		require.NoError(t, err)
	}
	for i := range liveKeys {
		_, err := live.Inc(ctx, fmt.Sprint("live-", i), liveCount(i))
		require.NoError(t, err)
	}
	return db, path, opts, clock
}

// A damaged file can hold a block key of another length than 8 bytes that
// reads as the same h as its neighbour: a snapshot that updates the first
// window of that neighbour must still finish (and count the damage), not
// loop on a block range that holds nothing.
func TestSnapshotPastAKeyOfAnotherLength(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1}
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 500)
	// The second block's key is the h of its first window.
	var key []byte
	var first string
	bdb, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, bdb.Update(func(tx *bolt.Tx) error {
		bb := tx.Bucket(layout.BucketBlocks)
		c := bb.Cursor()
		c.First()
		k, v := c.Next()
		require.NotNil(t, k)
		var b record.Block
		require.NoError(t, record.DecodeBlock(&b, k, v))
		key, first = bytes.Clone(k), string(b.Windows[0].Key[9:])
		return bb.Put(append(bytes.Clone(k), 0), []byte("not a block"))
	}))
	require.NoError(t, bdb.Close())

	db, err := Open(path, opts)
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	before, err := w.Get(ctx, first)
	require.NoError(t, err)
	require.Positive(t, before)
	got, err := w.Inc(ctx, first, 1)
	require.NoError(t, err)
	require.Equal(t, before+1, got)
	require.NoError(t, db.Snapshot())
	assert.Error(t, db.Verify(), "the key of 9 bytes is reported")
	require.NoError(t, db.view(func(tx *bolt.Tx) error {
		assert.NotNil(t, tx.Bucket(layout.BucketBlocks).Get(key))
		return nil
	}))
}
