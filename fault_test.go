//go:build linux

package ratedb_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// diskFull makes every write to the open database file at path fail with
// ENOSPC, as on a full disk, until the returned restore is called: it finds
// bbolt's descriptor for the file in /proc/self/fd and puts /dev/full in its
// place (the original open file, and so its lock, is kept alive in a
// duplicate and put back by restore(true); restore(false), after the DB has
// closed its descriptor, only drops the duplicate). Reads through bbolt's
// memory map are unaffected.
func diskFull(t *testing.T, path string) (restore func(reinstate bool)) {
	t.Helper()
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	fd := -1
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == abs {
			_, err := fmt.Sscan(e.Name(), &fd)
			require.NoError(t, err)
		}
	}
	require.NotEqual(t, -1, fd, "the database file is open")
	saved, err := syscall.Dup(fd)
	require.NoError(t, err)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	require.NoError(t, err)
	require.NoError(t, syscall.Dup3(int(full.Fd()), fd, 0))
	require.NoError(t, full.Close())
	return func(reinstate bool) {
		if reinstate {
			require.NoError(t, syscall.Dup3(saved, fd, 0))
		}
		require.NoError(t, syscall.Close(saved))
	}
}

// logCatcher is a slog.Handler that forwards messages at Error level.
type logCatcher struct {
	mu   sync.Mutex
	msgs chan string
	all  []string
}

func (h *logCatcher) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCatcher) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	h.all = append(h.all, b.String())
	h.mu.Unlock()
	if r.Level >= slog.LevelError {
		select {
		case h.msgs <- b.String():
		default:
		}
	}
	return nil
}
func (h *logCatcher) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCatcher) WithGroup(string) slog.Handler      { return h }

// TestDiskFullDuringSnapshot: while every write fails, hits keep working
// (also for windows that spill and reload), each failed snapshot shows in
// Stats and in the log, the windows stay dirty, and the first snapshot after
// the disk recovers writes them all: nothing is lost.
func TestDiskFullDuringSnapshot(t *testing.T) {
	c := &mClock{}
	c.set(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	logs := &logCatcher{msgs: make(chan string, 1)}
	opts := &ratedb.Options{
		Clock: c.Now, CleanPeriod: -1, MaxHotKeys: 4,
		SnapshotPeriod: time.Millisecond, // the background snapshot is what logs
		Logger:         slog.New(logs),
	}
	db, err := ratedb.Open(path, opts)
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	const keys = 200
	secret := func(i int) string { return fmt.Sprintf("secret-user-%03d@example.com", i) }
	want := map[string]int64{}
	hitAll := func(n int) {
		for i := 0; i < keys; i++ {
			for j := 0; j < n; j++ {
				r, err := w.Hit(ctx, secret(i), 1000, 1)
				require.NoError(t, err)
				require.True(t, r.Allowed)
				want[secret(i)]++
			}
		}
	}
	hitAll(1)
	require.NoError(t, db.Snapshot())

	restore := diskFull(t, path)
	hitAll(2) // hits keep working while the disk is full
	err = db.Snapshot()
	require.Error(t, err, "a snapshot to a full disk fails")
	select { // a background snapshot failed and said so
	case msg := <-logs.msgs:
		assert.Contains(t, msg, "snapshot failed")
		for i := 0; i < keys; i++ {
			assert.NotContains(t, msg, secret(i), "keys are never logged")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no snapshot failure was logged")
	}
	st := db.Stats()
	assert.Positive(t, st.SnapshotFailures)
	assert.Error(t, st.LastSnapshotError)
	hitAll(1)
	for i := 0; i < keys; i++ { // every window is still counted, in memory
		n, err := w.Get(ctx, secret(i))
		require.NoError(t, err)
		require.Equal(t, want[secret(i)], n)
	}
	restore(true)

	require.NoError(t, db.Snapshot(), "the disk has room again")
	assert.NoError(t, db.Stats().LastSnapshotError)

	// Crash now (the file as it is, without Close): the recovered snapshot
	// holds everything.
	crashed := filepath.Join(t.TempDir(), "crashed.db")
	require.NoError(t, copyFile(path, crashed))
	db2, err := ratedb.Open(crashed, &ratedb.Options{Clock: c.Now, SnapshotPeriod: -1, CleanPeriod: -1, Logger: quietLogger()})
	require.NoError(t, err)
	defer db2.Close()
	w2, err := db2.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	for i := 0; i < keys; i++ {
		n, err := w2.Get(ctx, secret(i))
		require.NoError(t, err)
		require.Equal(t, want[secret(i)], n, "key %d", i)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, m := range logs.all {
		for i := 0; i < keys; i++ {
			require.NotContains(t, m, secret(i), "keys are never logged")
		}
	}
}

// TestDiskFullAtClose: a Close whose final snapshot cannot be written
// reports the error; the file still holds the last good snapshot.
func TestDiskFullAtClose(t *testing.T) {
	c := &mClock{}
	c.set(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	opts := &ratedb.Options{Clock: c.Now, SnapshotPeriod: -1, CleanPeriod: -1, Logger: quietLogger()}
	db, err := ratedb.Open(path, opts)
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = w.Inc(ctx, "a", 5)
	require.NoError(t, err)
	require.NoError(t, db.Snapshot())
	_, err = w.Inc(ctx, "a", 3)
	require.NoError(t, err)
	restore := diskFull(t, path)
	err = db.Close()
	require.Error(t, err, "the final snapshot failed")
	restore(false) // the DB closed its descriptor
	db = openDB(t, path, opts)
	w, err = db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	n, err := w.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, int64(5), n, "the last committed snapshot survives")
}

// Stats.JanitorFailures counts janitor passes that failed to clean the file;
// Clean runs one. A Clean that failed on a full disk was not counted (only
// the background janitor's failures were), unlike SnapshotFailures, which
// counts failed Snapshot calls too.
func TestDiskFullDuringCleanCountsAJanitorFailure(t *testing.T) {
	c := &mClock{}
	c.set(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	db := openDB(t, path, &ratedb.Options{Clock: c.Now, SnapshotPeriod: -1, CleanPeriod: -1, Logger: quietLogger()})
	w, err := db.Window(ratedb.FixedWindow, time.Second)
	require.NoError(t, err)
	for i := range 10 {
		_, err := w.Hit(ctx, fmt.Sprint("k", i), 5, 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Snapshot())
	c.set(c.get() + 2000) // every window has ended

	restore := diskFull(t, path)
	_, err = db.Clean()
	restore(true)
	require.Error(t, err, "the pass could not write the file")
	assert.Equal(t, int64(1), db.Stats().JanitorFailures, "a failed Clean is a failed janitor pass")
}

// Stats.Cleaned counts each window the janitor removes once, even across a
// pass that removed windows from memory and then failed to delete their
// records from a full disk. Before the fix, that pass counted them as it
// took them out of memory, and the next pass, deleting their records, counted
// them again. Here the file holds k0..k9, of which k0..k4 are also in memory,
// and memory alone holds n0..n2 (never written): 13 windows, all ended.
func TestCleanedCountsOnceAcrossAFailedPass(t *testing.T) {
	c := &mClock{}
	c.set(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	opts := &ratedb.Options{Clock: c.Now, SnapshotPeriod: -1, CleanPeriod: -1, Logger: quietLogger()}
	db := openDB(t, path, opts)
	w, err := db.Window(ratedb.FixedWindow, time.Second)
	require.NoError(t, err)
	for i := range 10 {
		_, err := w.Hit(ctx, fmt.Sprint("k", i), 5, 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	db = openDB(t, path, opts)
	w, err = db.Window(ratedb.FixedWindow, time.Second)
	require.NoError(t, err)
	for i := range 5 {
		_, err := w.Hit(ctx, fmt.Sprint("k", i), 5, 1)
		require.NoError(t, err)
	}
	for i := range 3 {
		_, err := w.Hit(ctx, fmt.Sprint("n", i), 5, 1)
		require.NoError(t, err)
	}
	st := db.Stats()
	require.Equal(t, int64(8), st.WindowsInMemory)
	require.Equal(t, int64(10), st.WindowsOnDisk)
	// A pass with nothing to remove waits for the audit after Open, which
	// reads the file through the descriptor diskFull replaces.
	removed, err := db.Clean()
	require.NoError(t, err)
	require.Zero(t, removed)
	c.set(c.get() + 2000) // every window has ended

	restore := diskFull(t, path)
	removed, err = db.Clean()
	restore(true)
	require.Error(t, err, "the pass could not write the file")
	st = db.Stats()
	require.Zero(t, st.WindowsInMemory, "the pass removed every window from memory")
	require.Equal(t, int64(10), st.WindowsOnDisk, "and none from the file")
	assert.Equal(t, 3, removed, "only n0..n2 are gone: k0..k4 are still in the file")
	assert.Equal(t, int64(3), st.Cleaned)

	removed, err = db.Clean()
	require.NoError(t, err)
	st = db.Stats()
	require.Zero(t, st.WindowsOnDisk)
	assert.Equal(t, 10, removed)
	assert.Equal(t, int64(13), st.Cleaned, "13 windows were removed, each counted once")
}
