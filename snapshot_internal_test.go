package ratedb

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The slab never hands out overlapping or moving bytes: bbolt keeps every
// slice passed to Put until the transaction ends.
func TestSlabNeverReuses(t *testing.T) {
	var sl slab
	var got [][]byte
	for i := 0; i < 3000; i++ {
		b := sl.alloc(1 + i%700)
		for j := range b {
			b[j] = byte(i)
		}
		got = append(got, b)
	}
	for i, b := range got {
		if len(b) != 1+i%700 || cap(b) != len(b) {
			t.Fatalf("slice %d: len %d cap %d", i, len(b), cap(b))
		}
		for _, c := range b {
			if c != byte(i) {
				t.Fatalf("slice %d was overwritten", i)
			}
		}
	}
}

// A slab with a pool hands out chunks from it, and gives them back on
// release; bytes handed out before a release are not reused before it.
func TestSlabPool(t *testing.T) {
	pool := [][]byte{make([]byte, 0, slabChunk)}
	sl := slab{pool: &pool}
	a := sl.alloc(slabChunk - 10)
	if len(pool) != 0 {
		t.Fatal("the pooled chunk was not taken")
	}
	b := sl.alloc(100) // does not fit: a new chunk
	if &a[0] == &b[0] || len(sl.used) != 2 {
		t.Fatalf("two chunks expected, used %d", len(sl.used))
	}
	sl.alloc(2 * slabChunk) // an odd size is never pooled
	sl.release()
	if len(pool) != 2 || sl.buf != nil || sl.used != nil {
		t.Fatalf("release pooled %d chunks, want 2", len(pool))
	}
}

// A snapshot's buffers are kept for the next one, hold no pointer to an
// entry in between, and are dropped after a snapshot that needed far less
// than they hold (a flood that has passed).
func TestSnapshotBuffersKeptAndDropped(t *testing.T) {
	clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, _ := db.Window(FixedWindow, time.Hour)
	hit := func(n int) {
		for i := range n {
			if _, err := w.Inc(context.Background(), fmt.Sprint("k", i), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	noPointers := func() {
		t.Helper()
		b := &db.snapBufs
		for i := range b.spare {
			for _, e := range b.spare[i][:cap(b.spare[i])] {
				if e != nil {
					t.Fatal("a spare dirty queue holds an entry")
				}
			}
		}
		for _, c := range b.set.changes[:cap(b.set.changes)] {
			if c.e != nil {
				t.Fatal("the change set holds an entry")
			}
		}
	}
	hit(30_000)
	if c := cap(db.snapBufs.set.changes); c < 30_000 {
		t.Fatalf("change set of capacity %d kept, want >= 30000", c)
	}
	if len(db.snapBufs.chunks) == 0 {
		t.Fatal("no slab chunk kept")
	}
	noPointers()
	hit(10)
	if c := cap(db.snapBufs.set.changes); c != 0 {
		t.Fatalf("change set of capacity %d kept after a snapshot of 10 changes", c)
	}
	noPointers()
	n, err := w.Get(context.Background(), "k7")
	if err != nil || n != 2 {
		t.Fatalf("k7 = %d, %v; want 2", n, err)
	}
}

// A snapshot larger than one batch writes every window; when a later batch
// fails, the batches already committed stay on disk, every window of the
// failed and later batches stays dirty, and the next snapshot writes them:
// after a reopen every count is exact.
func TestSnapshotBatches(t *testing.T) {
	defer func(n int) { snapshotBatch, testBatchHook = n, nil }(snapshotBatch)
	snapshotBatch = 10
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 8}
	path := filepath.Join(t.TempDir(), "rate.db")
	db, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.Window(FixedWindow, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const keys = 95
	for i := 0; i < keys; i++ {
		if _, err := w.Inc(ctx, fmt.Sprint("k", i), int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("injected")
	batches := 0
	testBatchHook = func() error {
		if batches++; batches == 3 {
			return boom
		}
		return nil
	}
	if err := db.Snapshot(); !errors.Is(err, boom) {
		t.Fatalf("Snapshot = %v, want the injected failure", err)
	}
	if st := db.Stats(); st.WindowsOnDisk != 20 || st.SnapshotFailures != 1 {
		t.Fatalf("after a failed third batch: %d windows on disk, %d failures; want 20, 1", st.WindowsOnDisk, st.SnapshotFailures)
	}
	testBatchHook = nil
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); st.WindowsOnDisk != keys || st.LastSnapshotWindows != keys-20 {
		t.Fatalf("after the retry: %d on disk, last snapshot wrote %d; want %d, %d", st.WindowsOnDisk, st.LastSnapshotWindows, keys, keys-20)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, _ = db.Window(FixedWindow, time.Hour)
	for i := 0; i < keys; i++ {
		if n, err := w.Get(ctx, fmt.Sprint("k", i)); err != nil || n != int64(i+1) {
			t.Fatalf("k%d after reopen = %d, %v; want %d", i, n, err, i+1)
		}
	}
	if st := db.Stats(); st.WindowsOnDisk != keys {
		t.Fatalf("%d windows on disk after reopen, want %d", st.WindowsOnDisk, keys)
	}
}

// A transaction stops at a block boundary once it has put snapshotTxBytes
// bytes of blocks: a snapshot of sparse changes in a large file then takes
// several transactions, each committed with the windows it wrote, and every
// window is written once. Every count is exact after a reopen.
func TestSnapshotTxBytesBudget(t *testing.T) {
	defer func(b int64) { snapshotTxBytes, testBatchHook = b, nil }(snapshotTxBytes)
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1}
	path := filepath.Join(t.TempDir(), "rate.db")
	db, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := db.Window(FixedWindow, time.Hour)
	ctx := context.Background()
	const keys = 3000
	inc := func(from, step int) {
		for i := from; i < keys; i += step {
			if _, err := w.Inc(ctx, fmt.Sprint("k", i), int64(i%7+1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	inc(0, 1)
	if err := db.Snapshot(); err != nil { // one transaction: the budget is large
		t.Fatal(err)
	}
	snapshotTxBytes = 4 << 10
	txs := 0
	testBatchHook = func() error { txs++; return nil }
	inc(0, 10) // every 10th key again: sparse changes over every block
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	st := db.Stats()
	if txs < 5 || st.LastSnapshotWindows != keys/10 || st.WindowsOnDisk != keys {
		t.Fatalf("%d transactions, %d windows written, %d on disk; want >= 5, %d, %d", txs, st.LastSnapshotWindows, st.WindowsOnDisk, keys/10, keys)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(path, opts); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, _ = db.Window(FixedWindow, time.Hour)
	for i := range keys {
		want := int64(i%7 + 1)
		if i%10 == 0 {
			want *= 2
		}
		if n, err := w.Get(ctx, fmt.Sprint("k", i)); err != nil || n != want {
			t.Fatalf("k%d after reopen = %d, %v; want %d", i, n, err, want)
		}
	}
}

// loweredEntry opens a DB whose injected clock reads ten hours ahead, counts
// 3 for key "k" in a minute window and snapshots it (the file's record ends
// ten hours ahead), then sets the clock right (at t0) and counts 1 more: the
// window is capped to end at t0+1m, a lowered end the file does not hold.
func loweredEntry(t *testing.T) (db *DB, w *Window, clk *settableClock, t0 time.Time) {
	t.Helper()
	t0 = time.UnixMilli(1_767_225_600_000)
	clk = &settableClock{t: t0.Add(10 * time.Hour)}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	w, err = db.Window(FixedWindow, time.Minute)
	require.NoError(t, err)
	_, err = w.Inc(context.Background(), "k", 3)
	require.NoError(t, err)
	require.NoError(t, db.Snapshot())
	clk.Set(t0)
	_, err = w.Inc(context.Background(), "k", 1)
	require.NoError(t, err)
	return db, w, clk, t0
}

// A failed snapshot must give back the lowered bit it cleared when it copied
// the entry: otherwise the janitor lets the entry, whose end the clock model
// lowered, leave memory before any snapshot has written it, and the file's
// record, ending later, brings the ended window (and its count) back.
func TestFailedSnapshotKeepsLoweredEnd(t *testing.T) {
	defer func() { testBatchHook = nil }()
	db, w, clk, t0 := loweredEntry(t)
	ctx := context.Background()
	testBatchHook = func() error { return errors.New("disk full") }
	if err := db.Snapshot(); err == nil {
		t.Fatal("snapshot did not fail")
	}
	testBatchHook = nil
	clk.Set(t0.Add(2 * time.Minute)) // the capped window has ended
	if _, err := db.Clean(); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Get(ctx, "k"); err != nil || n != 0 {
		t.Fatalf("Get = %d, %v after the window ended; want 0 (the file's stale record came back)", n, err)
	}
}

// A snapshot that writes an entry whose end the clock model lowered clears
// its lowered bit (the file now ends where memory does): once its window
// has ended, the janitor removes it from memory and file like any other.
func TestSnapshotClearsLoweredEnd(t *testing.T) {
	db, _, clk, t0 := loweredEntry(t)
	if err := db.Snapshot(); err != nil { // writes the lowered end
		t.Fatal(err)
	}
	clk.Set(t0.Add(2 * time.Minute))
	n, err := db.Clean()
	if err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); n != 1 || st.WindowsInMemory != 0 || st.WindowsOnDisk != 0 {
		t.Fatalf("Clean removed %d, windows in memory %d, on disk %d; want 1, 0, 0", n, st.WindowsInMemory, st.WindowsOnDisk)
	}
}

// A cold entry that a snapshot has copied but not yet committed (inflight)
// must stay in memory when a call releases it (release -> dropIfClean, as
// when the cache's Set is dropped): the file does not hold its state until
// the commit, and a call in between would read the older state from the file.
func TestDropIfCleanKeepsInflightEntry(t *testing.T) {
	defer func() { testBatchHook = nil }()
	clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	w, _ := db.Window(FixedWindow, time.Hour)
	if _, err := w.Inc(ctx, "a", 1); err != nil { // fills the cache
		t.Fatal(err)
	}
	if _, err := w.Inc(ctx, "b", 3); err != nil { // fresh, with the cache full: cold
		t.Fatal(err)
	}
	h := w.hash("b")
	sh := db.shard(h)
	sh.mu.Lock()
	e := sh.find(h, w.spec, "b")
	sh.mu.Unlock()
	if e == nil || e.hot.Load() {
		t.Skip("b is not a cold entry in memory")
	}
	var got int64 = -1
	testBatchHook = func() error {
		testBatchHook = nil
		db.dropIfClean(e) // e is inflight: copied, not yet committed
		got, err = w.Get(ctx, "b")
		return err
	}
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if got != 3 {
		t.Fatalf("Get during the snapshot = %d, want 3: the entry left memory before its commit", got)
	}
}

// A janitor pass that meets an entry a snapshot has copied but not yet
// committed (inflight) must leave it in memory, even if its window has
// ended: the copy cleared the entry's lowered bit, and if the snapshot then
// fails, only an entry still in memory gets the bit back and is written
// again. Removed meanwhile, it leaves the file's record, which ends later
// (the end the clock model lowered), to bring the ended window and its
// count back.
func TestJanitorKeepsInflightEntryWhoseSnapshotFails(t *testing.T) {
	defer func() { testBatchHook, testBeforeUncache = nil, nil }()
	db, w, clk, t0 := loweredEntry(t)
	memDone := make(chan struct{})
	cleaned := make(chan error, 1)
	testBatchHook = func() error {
		testBatchHook = nil
		// "k" is inflight now. A janitor pass after the capped window has
		// ended runs its memory part, then waits for this snapshot (its
		// file part takes snapMu).
		clk.Set(t0.Add(2 * time.Minute))
		testBeforeUncache = func() {
			testBeforeUncache = nil
			close(memDone)
		}
		go func() {
			_, err := db.Clean()
			cleaned <- err
		}()
		<-memDone
		return errors.New("disk full")
	}
	if err := db.Snapshot(); err == nil {
		t.Fatal("snapshot did not fail")
	}
	require.NoError(t, <-cleaned)
	n, err := w.Get(context.Background(), "k")
	require.NoError(t, err)
	assert.Zero(t, n, "Get after the window ended: the file's stale record came back")
}
