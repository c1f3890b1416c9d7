package ratedb_test

import (
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/require"
)

// fakeClock is a settable clock for Options.Clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// epoch is a round instant (a multiple of a day since the Unix epoch), so
// that FixedWindow boundaries in tests are easy to read.
var epoch = time.UnixMilli(1_767_225_600_000) // 2026-01-01T00:00:00Z

func newClock() *fakeClock { return &fakeClock{t: epoch} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// testOptions returns options with the background goroutines disabled and the
// given clock: tests drive Snapshot and Clean themselves.
func testOptions(c *fakeClock) *ratedb.Options {
	return &ratedb.Options{Clock: c.Now, SnapshotPeriod: -1, CleanPeriod: -1}
}

// openDB opens a DB at path ("" for memory only) and closes it at the end of
// the test if the test has not closed it.
func openDB(t testing.TB, path string, opts *ratedb.Options) *ratedb.DB {
	t.Helper()
	db, err := ratedb.Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// tempPath returns a fresh database path in the test's temporary directory.
func tempPath(t testing.TB) string { return filepath.Join(t.TempDir(), "rate.db") }

// modes runs fn against an in-memory DB and a file-backed one.
func modes(t *testing.T, fn func(t *testing.T, path string)) {
	t.Run("memory", func(t *testing.T) { fn(t, "") })
	t.Run("file", func(t *testing.T) { fn(t, tempPath(t)) })
}

func filepathGlob(pattern string) ([]string, error) { return filepath.Glob(pattern) }

func runtimeGosched() { runtime.Gosched() }
