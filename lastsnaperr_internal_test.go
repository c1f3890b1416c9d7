package ratedb

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Stats.LastSnapshotError: "nil if the last snapshot succeeded".
func TestLastSnapshotErrorClearedBySuccess(t *testing.T) {
	defer func() { testBatchHook = nil }()
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, _ := db.Window(FixedWindow, time.Second)
	if _, err := w.Hit(context.Background(), "k", 10, 1); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("injected")
	testBatchHook = func() error { return boom }
	if err := db.Snapshot(); !errors.Is(err, boom) {
		t.Fatalf("snapshot = %v", err)
	}
	testBatchHook = nil
	now = now.Add(time.Minute) // the window ends; the janitor drops it unsaved
	if _, err := db.Clean(); err != nil {
		t.Fatal(err)
	}
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if e := db.Stats().LastSnapshotError; e != nil {
		t.Fatalf("the last snapshot succeeded, LastSnapshotError = %v", e)
	}
}
