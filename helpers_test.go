package ratedb_test

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/limitertest"
	"github.com/stretchr/testify/require"
)

// fakeClock is the settable clock of the shared suite, for Options.Clock.
type fakeClock = limitertest.Clock

// epoch is a round instant (a multiple of a day since the Unix epoch), so
// that FixedWindow boundaries in tests are easy to read.
var epoch = limitertest.Epoch

func newClock() *fakeClock { return limitertest.NewClock() }

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
