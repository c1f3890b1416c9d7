//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package ratedb

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenOfAFileReplacedWhileWaiting: Open validated the file, and bbolt
// then waits for its lock, held by a process that renames another file over
// the path and lets the old one go (what ratedb compact does). Open must
// end up with the file at the path, not the old one, whose writes nothing
// would ever read again.
func TestOpenOfAFileReplacedWhileWaiting(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	dir := t.TempDir()
	path, next := filepath.Join(dir, "rate.db"), filepath.Join(dir, "next.db")
	for p, key := range map[string]string{path: "old-key", next: "new-key"} {
		db, w := openWindow(t, p, now)
		_, err := w.Inc(context.Background(), key, 5)
		require.NoError(t, err)
		require.NoError(t, db.Close())
	}
	defer func() { testBeforeOpenBolt = nil }()
	replaced := false
	testBeforeOpenBolt = func() {
		if replaced {
			return
		}
		replaced = true
		// Hold the old file's lock, as compact holds its source.
		f, err := os.Open(path)
		require.NoError(t, err)
		require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
		go func() {
			// Time for bbolt to open the old file and wait for its lock;
			// if it has not yet, it opens the new one and the test
			// proves less, never fails.
			time.Sleep(200 * time.Millisecond)
			_ = os.Rename(next, path)
			_ = f.Close() // the lock goes with it
		}()
	}
	// OpenTimeout is a guard against a hang, not part of what is tested:
	// with the default (1 s), a machine short of CPU that ran the
	// goroutine above late let Open give up with ErrLocked (once in 80
	// runs beside CPU hogs under -race).
	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1, OpenTimeout: time.Minute})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	ctx := context.Background()
	n, err := w.Get(ctx, "new-key")
	require.NoError(t, err)
	assert.EqualValues(t, 5, n, "Open holds the file now at the path")
	n, err = w.Get(ctx, "old-key")
	require.NoError(t, err)
	assert.Zero(t, n, "not the file it replaced")
}

// TestOpenTimeoutBoundsAllWaits: Open waits for the lock twice, to
// validate the file and in bbolt's Open; OpenTimeout bounds both together,
// not each (which let a retried Open wait six times as long).
func TestOpenTimeoutBoundsAllWaits(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	db, _ := openWindow(t, path, now)
	require.NoError(t, db.Close())

	// Another holder keeps the lock through the first wait...
	first, err := os.Open(path)
	require.NoError(t, err)
	require.NoError(t, syscall.Flock(int(first.Fd()), syscall.LOCK_EX))
	go func() {
		time.Sleep(350 * time.Millisecond) // into Open's first wait
		_ = first.Close()
	}()
	// ...and one more takes it before bbolt's Open, for good.
	defer func() { testBeforeOpenBolt = nil }()
	var second *os.File
	defer func() {
		if second != nil {
			_ = second.Close()
		}
	}()
	testBeforeOpenBolt = func() {
		second, err = os.Open(path)
		require.NoError(t, err)
		require.NoError(t, syscall.Flock(int(second.Fd()), syscall.LOCK_EX))
	}
	const timeout = 500 * time.Millisecond
	start := time.Now()
	_, err = Open(path, &Options{OpenTimeout: timeout, SnapshotPeriod: -1, CleanPeriod: -1})
	elapsed := time.Since(start)
	require.ErrorIs(t, err, ErrLocked)
	assert.Less(t, elapsed, timeout+200*time.Millisecond, "both waits together stay within OpenTimeout")
}
