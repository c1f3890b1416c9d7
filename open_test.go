package ratedb_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dirListing returns the names under dir, recursively, with their modes, so
// a test can check that Open renamed, created and wrote nothing.
func dirListing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out[p] = fi.Mode().String() + " " + fi.ModTime().String()
		return nil
	})
	require.NoError(t, err)
	return out
}

// openNotRegular opens path under every OnCorrupt policy, expecting
// ErrNotRegularFile at once (within timeout: a named pipe used to block Open
// for ever), and checks that nothing under root changed.
func openNotRegular(t *testing.T, root, path, kind string) {
	t.Helper()
	for _, policy := range []ratedb.CorruptPolicy{ratedb.CorruptFail, ratedb.CorruptMoveAside} {
		before := dirListing(t, root)
		done := make(chan error, 1)
		go func() {
			db, err := ratedb.Open(path, &ratedb.Options{OnCorrupt: policy, SnapshotPeriod: -1, CleanPeriod: -1})
			if err == nil {
				_ = db.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			require.ErrorIs(t, err, ratedb.ErrNotRegularFile, "policy %d", policy)
			assert.NotErrorIs(t, err, ratedb.ErrCorrupt)
			assert.Contains(t, err.Error(), kind)
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) with policy %d has not returned after 10 s", kind, policy)
		}
		assert.Equal(t, before, dirListing(t, root), "policy %d: Open renamed, created or wrote something", policy)
	}
}

// Bug 1 of issue 9: Open on a directory renamed it aside under
// CorruptMoveAside and created a database in its place.
func TestOpenDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o600))
	openNotRegular(t, root, dir, "a directory")

	link := filepath.Join(root, "link")
	require.NoError(t, os.Symlink(dir, link))
	openNotRegular(t, root, link, "a directory")
}

// CorruptMoveAside moves only a regular file it judged corrupt: a symbolic
// link to a corrupt file is reported, and neither it nor its target moves.
func TestMoveAsideLeavesSymlinks(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "target.db")
	require.NoError(t, os.WriteFile(target, []byte("not a database"), 0o600))
	link := filepath.Join(root, "rate.db")
	require.NoError(t, os.Symlink(target, link))
	before := dirListing(t, root)
	_, err := ratedb.Open(link, &ratedb.Options{OnCorrupt: ratedb.CorruptMoveAside})
	require.ErrorIs(t, err, ratedb.ErrCorrupt)
	require.ErrorIs(t, err, ratedb.ErrNotRegularFile)
	assert.Equal(t, before, dirListing(t, root))
}

// Bug 3 of issue 9: MaxHotKeys had no upper bound; 1<<40 ran the process
// out of memory and 10*MaxHotKeys overflowed for larger values.
func TestMaxHotKeysLimit(t *testing.T) {
	for _, n := range []int64{ratedb.MaxHotKeysLimit + 1, 1 << 30, 1 << 40, 1 << 62, math.MaxInt64} {
		_, err := ratedb.Open("", &ratedb.Options{MaxHotKeys: n})
		require.ErrorIs(t, err, ratedb.ErrInvalidArgument, "MaxHotKeys %d", n)
		assert.Contains(t, err.Error(), "MaxHotKeys")
		assert.Contains(t, err.Error(), "up front", "the error says what it would allocate")
	}
	_, err := ratedb.Open("", &ratedb.Options{MaxHotKeys: 1 << 40})
	assert.Contains(t, err.Error(), "52.8 TB")

	// The maximum itself is valid (checked with another invalid field, so
	// that nothing is allocated).
	_, err = ratedb.Open("", &ratedb.Options{MaxHotKeys: ratedb.MaxHotKeysLimit, OpenTimeout: -1})
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	assert.NotContains(t, err.Error(), "MaxHotKeys")
}
