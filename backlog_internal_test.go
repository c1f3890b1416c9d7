package ratedb

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// When memory is full and the snapshot a new key's hit runs to make room
// fails, the hit returns that error and counts nothing; the backlog stays
// counted and a later snapshot writes it, after which the same hit succeeds.
func TestBacklogSnapshotFailure(t *testing.T) {
	defer func() { testBatchHook = nil }()
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 4, MaxSnapshotBacklog: 12}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 16; i++ {
		if _, err := w.Hit(ctx, fmt.Sprint("k", i), 10, 1); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("injected")
	testBatchHook = func() error { return boom }
	if _, err := w.Hit(ctx, "new", 10, 1); !errors.Is(err, boom) {
		t.Fatalf("hit on a new key with memory full and the file failing = %v, want the injected failure", err)
	}
	st := db.Stats()
	if st.SnapshotBacklog != 16 || st.WindowsInMemory != 16 || st.Allowed != 16 || st.SnapshotFailures != 1 {
		t.Fatalf("after the failed hit: %+v; want backlog 16, 16 in memory, 16 allowed, 1 failure", st)
	}
	if n, err := w.Get(ctx, "new"); err != nil || n != 0 {
		t.Fatalf("the failed hit counted: Get = %d, %v", n, err)
	}
	testBatchHook = nil
	if r, err := w.Hit(ctx, "new", 10, 1); err != nil || r.Count != 1 {
		t.Fatalf("hit after the file recovered = %+v, %v; want count 1", r, err)
	}
	for i := 0; i < 16; i++ {
		if n, err := w.Get(ctx, fmt.Sprint("k", i)); err != nil || n != 1 {
			t.Fatalf("k%d = %d, %v; want 1", i, n, err)
		}
	}
	if st := db.Stats(); st.SnapshotBacklog != 1 || st.WindowsOnDisk != 16 {
		t.Fatalf("after the retry: backlog %d, %d on disk; want 1, 16", st.SnapshotBacklog, st.WindowsOnDisk)
	}
}
