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
	db, w := openWindow(t, path, now)
	defer db.Close()
	ctx := context.Background()
	n, err := w.Get(ctx, "new-key")
	require.NoError(t, err)
	assert.EqualValues(t, 5, n, "Open holds the file now at the path")
	n, err = w.Get(ctx, "old-key")
	require.NoError(t, err)
	assert.Zero(t, n, "not the file it replaced")
}
