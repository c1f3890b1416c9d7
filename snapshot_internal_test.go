package ratedb

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
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
