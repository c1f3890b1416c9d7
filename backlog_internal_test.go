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

// A changed window the janitor removes leaves the snapshot backlog at once:
// the file need not get its change. Before, Stats.SnapshotBacklog (the
// ratedb_snapshot_backlog gauge) went on counting it until the next
// snapshot skipped it, and so reported changes waiting for the file when
// none were, with snapshots disabled until Close. Nothing may be taken off
// twice: the snapshot that meets such a window in its queue leaves the
// backlog alone, also after a failed snapshot queued it again.
func TestBacklogForgetsWindowsTheJanitorRemoves(t *testing.T) {
	defer func() { testBatchHook = nil }()
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hit := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if _, err := w.Hit(ctx, fmt.Sprint(prefix, i), 10, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string, backlog, inMemory, onDisk int64) {
		t.Helper()
		st := db.Stats()
		if st.SnapshotBacklog != backlog || st.WindowsInMemory != inMemory || st.WindowsOnDisk != onDisk {
			t.Fatalf("%s: backlog %d, %d in memory, %d on disk; want %d, %d, %d",
				what, st.SnapshotBacklog, st.WindowsInMemory, st.WindowsOnDisk, backlog, inMemory, onDisk)
		}
	}
	clean := func(want int) {
		t.Helper()
		now = now.Add(2 * time.Second) // every window has ended
		if n, err := db.Clean(); err != nil || n != want {
			t.Fatalf("Clean = %d, %v; want %d", n, err, want)
		}
	}

	hit("k", 10)
	check("after 10 new windows", 10, 10, 0)
	clean(10)
	check("after the janitor removed them", 0, 0, 0)
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	check("after the snapshot that skipped them", 0, 0, 0)

	hit("a", 5)
	testBatchHook = func() error { return errors.New("injected") }
	if err := db.Snapshot(); err == nil {
		t.Fatal("the snapshot did not fail")
	}
	testBatchHook = nil
	check("after a failed snapshot", 5, 5, 0)
	clean(5)
	check("after the janitor removed the windows it queued again", 0, 0, 0)
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	check("after the next snapshot", 0, 0, 0)

	hit("b", 3)
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	check("after 3 windows written", 0, 3, 3)
}
