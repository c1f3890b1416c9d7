//go:build unix

package tools

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// countFile writes a state file at path holding key "k" counted n times in
// a live one-hour window.
func countFile(t *testing.T, path string, n int64) {
	t.Helper()
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 16})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = w.Inc(context.Background(), "k", n)
	require.NoError(t, err)
	require.NoError(t, db.Close())
}

// readCount returns the count of key "k" in the state file at path.
func readCount(t *testing.T, path string) int64 {
	t.Helper()
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 16})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	n, err := w.Get(context.Background(), "k")
	require.NoError(t, err)
	return n
}

// TestCompactOfAFileReplacedWhileWaiting: after its janitor pass, Compact
// opens the file again and may wait for its lock. If the file at the path
// is replaced meanwhile (another compact renamed its result into place,
// and a service opened that one and counted in it), Compact must not
// compact the old file it waited for and rename it over the new one: the
// new file's counts would be lost, and the service would go on writing to
// a file no longer at the path.
func TestCompactOfAFileReplacedWhileWaiting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	countFile(t, path, 1)
	newer := filepath.Join(dir, "newer.db")
	countFile(t, newer, 5)

	done := make(chan struct{})
	testBeforeCompactOpen = func() {
		// Another handle holds the file, then replaces it and lets the
		// old one go while Compact waits for its lock.
		h, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		require.NoError(t, err)
		go func() {
			defer close(done)
			time.Sleep(300 * time.Millisecond) // Compact is waiting for the lock
			assert.NoError(t, os.Rename(newer, path))
			assert.NoError(t, h.Close())
		}()
	}
	defer func() { testBeforeCompactOpen = nil }()

	_, err := Compact(path)
	<-done
	t.Logf("Compact: %v", err)
	assert.Equal(t, int64(5), readCount(t, path), "the file at the path is the one that replaced the old one")
}

// Compact writes its new file under a name of its own, created
// exclusively, and removes what compacts cut short left (regular files
// only: a symbolic link planted at such a name is neither followed nor
// removed, and its target is untouched); another file's leftovers stay, and
// so does a file no compact created, such as an operator's
// "<name>.compact-old".
func TestCompactTempFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s[1].db") // '[' would be a glob pattern
	countFile(t, path, 3)
	target := filepath.Join(dir, "elsewhere")
	require.NoError(t, os.WriteFile(target, []byte("keep"), 0o600))
	for _, n := range []string{"s[1].db.compact", "s[1].db.compact-123", "s1.db.compact-9", "s[1].db.compact-old", "s[1].db.compact-"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("leftover"), 0o600))
	}
	require.NoError(t, os.Symlink(target, filepath.Join(dir, "s[1].db.compact-link")))

	_, err := Compact(path)
	require.NoError(t, err)
	assert.Equal(t, int64(3), readCount(t, path))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"s[1].db", "elsewhere", "s1.db.compact-9", "s[1].db.compact-link", "s[1].db.compact-old", "s[1].db.compact-"}, names)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b))
}

// Whoever can write to the directory (the service's user, when root runs
// compact on the service's file) can replace the new file's name with a
// symbolic link once it is created: Compact must write through the file it
// created, never follow a link planted at its name, nor chmod the link's
// target, and must not rename the link into place.
func TestCompactFollowsNoLinkPlantedAtItsTempName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	countFile(t, path, 3)
	require.NoError(t, os.Chmod(path, 0o644))
	elsewhere := t.TempDir()
	created := filepath.Join(elsewhere, "created") // does not exist
	existing := filepath.Join(elsewhere, "existing")
	require.NoError(t, os.WriteFile(existing, nil, 0o600))

	for _, target := range []string{created, existing} {
		testAfterCompactTemp = func(tmp string) {
			require.NoError(t, os.Remove(tmp))
			require.NoError(t, os.Symlink(target, tmp))
		}
		_, err := Compact(path)
		testAfterCompactTemp = nil
		t.Logf("Compact with a link to %s planted: %v", filepath.Base(target), err)

		_, serr := os.Stat(created)
		assert.ErrorIs(t, serr, os.ErrNotExist, "a file was created where the planted link points")
		fi, serr := os.Stat(existing)
		require.NoError(t, serr)
		assert.Zero(t, fi.Size(), "the planted link's target was written to")
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the planted link's target was chmodded")
		fi, serr = os.Lstat(path)
		require.NoError(t, serr)
		require.True(t, fi.Mode().IsRegular(), "the state file was replaced by the planted link")
		assert.Equal(t, int64(3), readCount(t, path))
		for _, e := range mustReadDir(t, dir) {
			if e.Type()&os.ModeSymlink != 0 {
				require.NoError(t, os.Remove(filepath.Join(dir, e.Name())))
			}
		}
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	return ents
}

// The janitor pass drops damaged blocks from the file in place, before the
// rewrite: when the rewrite then fails, the result Compact returns with the
// error still counts them, so that the command can say what it changed.
func TestCompactCountsDamageWhenTheRewriteFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	countFile(t, path, 1)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(layout.BucketBlocks)
		k, v := b.Cursor().First()
		require.NotNil(t, k)
		v = append([]byte(nil), v...)
		v[len(v)/2] ^= 0xff
		return b.Put(append([]byte(nil), k...), v)
	}))
	require.NoError(t, db.Close())
	// The rewrite fails: its new file's name is replaced meanwhile.
	testAfterCompactTemp = func(tmp string) {
		require.NoError(t, os.Remove(tmp))
		require.NoError(t, os.WriteFile(tmp, nil, 0o600))
	}
	defer func() { testAfterCompactTemp = nil }()

	res, err := Compact(path)
	require.ErrorContains(t, err, "was replaced while compact wrote it")
	assert.Equal(t, int64(1), res.Damaged)
}
