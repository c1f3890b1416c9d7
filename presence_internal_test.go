package ratedb

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/ratedb/ratedb/internal/siphash"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A presence filter never says "absent" for a hash it holds, or for one in
// a damaged range; sized for its windows, it says "maybe" for few others,
// and it asks to be rebuilt once a quarter of its bits are set.
func TestPresenceFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 100_000
	p := newPresence(siphash.Key{}, n)
	assert.Equal(t, int64(n), p.sized)
	assert.GreaterOrEqual(t, len(p.words)*64, presenceBitsPerWindow*n)
	assert.Less(t, len(p.words)*64, 2*presenceBitsPerWindow*n)
	in := make([]uint64, n)
	for i := range in {
		in[i] = rng.Uint64()
		p.add(in[i])
	}
	for _, h := range in {
		require.True(t, p.mayContain(h), "hash %x added but reported absent", h)
	}
	maybe := 0
	const probes = 200_000
	for range probes {
		if p.mayContain(rng.Uint64()) {
			maybe++
		}
	}
	assert.Less(t, float64(maybe)/probes, 0.04, "false \"maybe\" rate")
	assert.False(t, p.stale(n), "a filter sized for its windows is not stale")
	assert.True(t, p.stale(n/10), "a file shrunk below an eighth asks for a smaller filter")
	for p.set.Load() <= int64(len(p.words))*64/4 {
		p.add(rng.Uint64())
	}
	assert.True(t, p.stale(n), "a quarter of the bits set")

	d := newPresence(siphash.Key{}, 10)
	d.damaged = [][2]uint64{{0, 99}, {1000, 1999}, {math.MaxUint64 - 5, math.MaxUint64}}
	for _, h := range []uint64{0, 50, 99, 1000, 1500, 1999, math.MaxUint64 - 5, math.MaxUint64} {
		assert.True(t, d.mayContain(h), "hash %d in a damaged range", h)
	}
	for _, h := range []uint64{100, 999, 2000, math.MaxUint64 - 6} {
		w, m := d.mask(h)
		if w.Load()&m != m {
			assert.False(t, d.mayContain(h), "hash %d outside every damaged range", h)
		}
	}
}

// presenceDB opens a file whose windows leave memory once written: a small
// cache, and no background work (tests call Snapshot and buildPresence).
func presenceDB(t *testing.T, path string, now *time.Time) (*DB, *Window) {
	t.Helper()
	db, err := Open(path, &Options{
		Clock: func() time.Time { return *now }, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 16,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	return db, w
}

// incAll adds 1 to every key and checks each count is want.
func incAll(t *testing.T, w *Window, keys []string, want int64) {
	t.Helper()
	for _, k := range keys {
		got, err := w.Inc(context.Background(), k, 1)
		require.NoError(t, err)
		require.Equal(t, want, got, "key %s", k)
	}
}

func keysOf(prefix string, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprint(prefix, i)
	}
	return ks
}

// With the filter built, new keys skip the file and keys in it are still
// read from it: every count continues.
func TestPresenceAvoidsReadsOfNewKeys(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	db, w := presenceDB(t, filepath.Join(t.TempDir(), "rate.db"), &now)
	old := keysOf("old-", 2000)
	incAll(t, w, old, 1)
	require.NoError(t, db.Snapshot())
	require.Nil(t, db.presence.Load(), "no filter before the first build")
	db.buildPresence(false)
	p := db.presence.Load()
	require.NotNil(t, p)
	assert.Equal(t, p.bytes(), db.Stats().PresenceFilterBytes)

	before := db.Stats()
	incAll(t, w, keysOf("new-", 2000), 1)
	avoided := db.Stats().FileReadsAvoided - before.FileReadsAvoided
	assert.Greater(t, avoided, int64(1900), "new keys that skipped the file")
	require.NoError(t, db.Snapshot())
	incAll(t, w, old, 2)
	incAll(t, w, keysOf("new-", 2000), 2)
	assert.Greater(t, db.Stats().Reloaded-before.Reloaded, int64(3900), "windows read back from the file")
}

// Windows written while a build reads the file, into blocks it has already
// read or not yet, are in the filter it puts in use: not one count restarts.
// (Without the marks a write sets in the filter being built, the keys of
// blocks already read would be lost to the filter, and their windows open
// afresh.)
func TestPresenceBuildRacesWrites(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	db, w := presenceDB(t, filepath.Join(t.TempDir(), "rate.db"), &now)
	first := keysOf("a-", 3000)
	incAll(t, w, first, 1)
	require.NoError(t, db.Snapshot())

	defer func(n int) { presenceChunk = n }(presenceChunk)
	presenceChunk = 4
	var during [][]string
	testPresenceChunkHook = func() {
		// Between the build's transactions: new windows, and changes to
		// old ones, are written to every part of the file.
		ks := keysOf(fmt.Sprintf("b%d-", len(during)), 50)
		incAll(t, w, ks, 1)
		incAll(t, w, first[len(during)*10:len(during)*10+10], 2)
		require.NoError(t, db.Snapshot())
		during = append(during, ks)
	}
	defer func() { testPresenceChunkHook = nil }()
	db.buildPresence(false)
	testPresenceChunkHook = nil
	require.NotNil(t, db.presence.Load())
	require.Greater(t, len(during), 10, "the build read the file in many transactions")

	reloaded := db.Stats().Reloaded
	for i, ks := range during {
		incAll(t, w, ks, 2)
		incAll(t, w, first[i*10:i*10+10], 3)
	}
	incAll(t, w, first[len(during)*10:], 2)
	// All but the few the cache (of 16) holds came back from the file.
	assert.GreaterOrEqual(t, db.Stats().Reloaded-reloaded, int64(len(during)*60+len(first)-len(during)*10-16),
		"windows that came back from the file")
}

// A block the build cannot decode leaves the hashes it may hold answering
// "maybe": a window there is looked for in the file (and found damaged, as
// without the filter), never taken as absent unseen.
func TestPresenceDamagedBlock(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 1000)
	var lost []string
	bdb, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	var secret siphash.Key
	require.NoError(t, bdb.Update(func(tx *bolt.Tx) error {
		s, err := layout.Secret(tx.Bucket(layout.BucketMeta))
		require.NoError(t, err)
		secret = s
		bb := tx.Bucket(layout.BucketBlocks)
		c := bb.Cursor()
		c.First()
		k, v := c.Next()
		k, v = c.Next()
		var b record.Block
		require.NoError(t, record.DecodeBlock(&b, k, v))
		for _, win := range b.Windows {
			lost = append(lost, string(win.Key))
		}
		bad := bytes.Clone(v)
		bad[len(bad)-1] ^= 0xff // its checksum fails
		return bb.Put(bytes.Clone(k), bad)
	}))
	require.NoError(t, bdb.Close())

	db, _ := presenceDB(t, path, &now)
	require.NoError(t, db.Snapshot()) // waits for the audit after Open
	db.buildPresence(false)
	p := db.presence.Load()
	require.NotNil(t, p)
	require.Len(t, p.damaged, 1)
	for _, k := range lost {
		assert.True(t, p.mayContain(layout.Hash(secret, []byte(k))), "a window of the damaged block")
	}
}

// Close stops a build at its next transaction, and dropping the filter (as a
// rebuild of a damaged file does) clears it and its size in Stats.
func TestPresenceBuildStopsAtClose(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	db, w := presenceDB(t, filepath.Join(t.TempDir(), "rate.db"), &now)
	incAll(t, w, keysOf("k", 1000), 1)
	require.NoError(t, db.Snapshot())
	defer func(n int) { presenceChunk = n }(presenceChunk)
	presenceChunk = 1
	calls := 0
	testPresenceChunkHook = func() {
		calls++
		if calls == 3 {
			db.closing.Store(true)
		}
	}
	defer func() { testPresenceChunkHook = nil }()
	db.buildPresence(false)
	assert.Equal(t, 3, calls)
	assert.Nil(t, db.presence.Load(), "an abandoned build is not put in use")
	assert.Nil(t, db.presenceNext.Load(), "nor left registered")
	db.closing.Store(false)

	testPresenceChunkHook = nil
	db.buildPresence(false)
	require.NotNil(t, db.presence.Load())
	require.Positive(t, db.Stats().PresenceFilterBytes)
	db.snapMu.Lock()
	db.boltMu.Lock()
	db.dropPresence()
	db.boltMu.Unlock()
	db.snapMu.Unlock()
	assert.Nil(t, db.presence.Load())
	assert.Zero(t, db.Stats().PresenceFilterBytes)
}

// TestPresenceFilterUnderStress runs a stream of new keys, and revisits of
// keys that have left memory, against the real clock with snapshots and
// janitor passes every millisecond, while filters are built one after
// another (besides those the DB starts itself) and windows are written and
// looked up. Every key's count must come out exact: a filter that said
// "absent" for a window in the file would restart its count.
func TestPresenceFilterUnderStress(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{
		SnapshotPeriod: time.Millisecond, CleanPeriod: time.Millisecond, MaxHotKeys: 64,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	// Anchored at each key's first hit: the real clock crossing an hour
	// boundary mid-test starts no new window.
	w, err := db.Window(PerKeyWindow, time.Hour)
	require.NoError(t, err)
	ctx := context.Background()
	const n, back, workers = 30_000, 500, 6
	key := func(i int) string { return fmt.Sprint("s-", i) }
	stop := make(chan struct{})
	done := make(chan struct{})
	var builds atomic.Int64
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			db.buildPresence(builds.Load()%2 == 1)
			builds.Add(1)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += workers {
				if _, err := w.Inc(ctx, key(i), 1); err != nil {
					errs <- err
					return
				}
				if i >= back {
					if _, err := w.Inc(ctx, key(i-back), 1); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// On a loaded machine the builder, or the snapshots that let windows
	// leave memory, may not have run during the hits: go on hitting other
	// keys, snapshotting and revisiting them, while the builder runs, until
	// both have happened (the checked keys above are not touched).
	for i := 0; builds.Load() < 2 || db.Stats().Reloaded == 0; i++ {
		require.Less(t, i, 1_000_000, "the builder or the reloads never ran")
		_, err := w.Inc(ctx, fmt.Sprint("filler-", i), 1)
		require.NoError(t, err)
		if i%64 == 63 {
			require.NoError(t, db.Snapshot())
			_, err := w.Inc(ctx, fmt.Sprint("filler-", i-63), 1)
			require.NoError(t, err)
		}
	}
	close(stop)
	<-done
	for i := range n {
		want := int64(2)
		if i >= n-back {
			want = 1
		}
		got, err := w.Get(ctx, key(i))
		require.NoError(t, err)
		require.Equal(t, want, got, "key %d", i)
	}
	st := db.Stats()
	t.Logf("%d builds; %d look-ups avoided, %d reloads, filter of %d bytes", builds.Load(), st.FileReadsAvoided, st.Reloaded, st.PresenceFilterBytes)
	assert.Positive(t, st.FileReadsAvoided, "new keys answered by the filter")
}

// Every look-up of a key of a damaged block skips it, counted in
// Stats.CorruptSkipped, but the log gets one line a second, not one a
// look-up, which requests could use to fill it.
func TestDamagedBlockLoggedOnceASecond(t *testing.T) {
	db, buf, lost := openWithDamagedBlock(t)
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	start := time.Now()
	for _, k := range lost {
		_, err := w.Get(context.Background(), k)
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, db.Stats().CorruptSkipped, int64(len(lost)), "every skip counted")
	lines := strings.Count(buf.String(), "skipping a damaged block")
	assert.GreaterOrEqual(t, lines, 1)
	assert.LessOrEqual(t, lines, 1+int(time.Since(start)/time.Second), "lines for %d look-ups", len(lost))
}

// The throttle reads the wall clock, which can step back (NTP, a VM
// restored): a line logged "in the future" must not silence the next ones
// until the clock catches up with it.
func TestDamagedBlockLoggedAfterTheClockWentBack(t *testing.T) {
	db, buf, lost := openWithDamagedBlock(t)
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	// The last line was logged at what the wall clock read an hour from
	// now, before it was stepped back.
	db.damagedLogAt.Store(time.Now().Add(time.Hour).UnixNano())
	_, err = w.Get(context.Background(), lost[0])
	require.NoError(t, err)
	assert.Positive(t, db.Stats().CorruptSkipped)
	assert.Equal(t, 1, strings.Count(buf.String(), "skipping a damaged block"), "the skip after the step is logged")
}

// openWithDamagedBlock opens a file one of whose blocks fails its checksum,
// logging to the buffer it returns, and the keys of that block's windows.
func openWithDamagedBlock(t *testing.T) (*DB, *bytes.Buffer, []string) {
	t.Helper()
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 1000)
	var lost []string
	bdb, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, bdb.Update(func(tx *bolt.Tx) error {
		bb := tx.Bucket(layout.BucketBlocks)
		c := bb.Cursor()
		c.First()
		k, v := c.Next()
		var b record.Block
		require.NoError(t, record.DecodeBlock(&b, k, v))
		for _, win := range b.Windows {
			// A record key ends with the user key ("audit-key-NNNN").
			lost = append(lost, string(win.Key[len(win.Key)-len("audit-key-0000"):]))
		}
		bad := bytes.Clone(v)
		bad[len(bad)-1] ^= 0xff // its checksum fails
		return bb.Put(bytes.Clone(k), bad)
	}))
	require.NoError(t, bdb.Close())
	require.NotEmpty(t, lost)
	require.True(t, strings.HasPrefix(lost[0], "audit-key-"), lost[0])

	buf := new(bytes.Buffer)
	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1,
		MaxHotKeys: 16, Logger: slog.New(slog.NewTextHandler(buf, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, buf, lost
}
