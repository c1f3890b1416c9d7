package envoyconf

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func limitYAML(n int) string {
	return "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: " +
		string(rune('0'+n)) + "}\n"
}

func userLimit(t *testing.T, c *Config) uint32 {
	t.Helper()
	rules := c.Rules()
	require.Len(t, rules, 1)
	return rules[0].Limit.RequestsPerUnit
}

// A poll that finds the files as they were reads none of them once their
// hashes are older than their last change by racyWindow; a rewrite in
// place that keeps the size, the mtime and the inode is still read (its
// ctime changed) and decided by its hash; a file changed within racyWindow
// of its hash is read at every poll.
func TestWatcherPollReadsOnlyFilesThatMayHaveChanged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reading only changed files needs Linux's ctime")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.WriteFile(file, []byte(limitYAML(1)), 0o600))
	mtime := time.Unix(1, 0) // as in the Nix store
	require.NoError(t, os.Chtimes(file, mtime, mtime))
	w := NewWatcher(dir, LoadOptions{})
	late := func() time.Time { return time.Now().Add(racyWindow + time.Hour) }

	t.Run("unchanged files are not read", func(t *testing.T) {
		w.now = late
		c, err := w.Load()
		require.NoError(t, err)
		assert.EqualValues(t, 1, userLimit(t, c))
		reads := w.reads
		for range 3 {
			_, changed, err := w.Poll()
			require.NoError(t, err)
			assert.False(t, changed)
		}
		assert.Equal(t, reads, w.reads, "no file read")
		assert.Equal(t, Stamp(dir), w.stamp(), "the stamp of the hashes kept is the stamp of the contents")
	})
	t.Run("a rewrite in place keeping size, mtime and inode is read", func(t *testing.T) {
		before, err := os.Stat(file)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(file, []byte(limitYAML(2)), 0o600))
		require.NoError(t, os.Chtimes(file, mtime, mtime))
		after, err := os.Stat(file)
		require.NoError(t, err)
		require.True(t, os.SameFile(before, after))
		require.Equal(t, before.Size(), after.Size())
		require.True(t, before.ModTime().Equal(after.ModTime()))

		_, changed, err := w.Poll()
		require.NoError(t, err)
		require.False(t, changed, "loaded at the next poll")
		c, changed, err := w.Poll()
		require.NoError(t, err)
		require.True(t, changed)
		assert.EqualValues(t, 2, userLimit(t, c))
	})
	t.Run("a file changed within racyWindow of its hash is read at every poll", func(t *testing.T) {
		w.now = time.Now // the file changed just now
		_, err := w.Load()
		require.NoError(t, err)
		for range 3 {
			reads := w.reads
			_, changed, err := w.Poll()
			require.NoError(t, err)
			assert.False(t, changed)
			assert.Equal(t, reads+1, w.reads, "a second write within the timestamp granularity would keep the status")
		}
		w.now = late
		_, _, err = w.Poll() // hashed long enough after its change
		require.NoError(t, err)
		reads := w.reads
		_, _, err = w.Poll()
		require.NoError(t, err)
		assert.Equal(t, reads, w.reads, "trusted again")
	})
}

// A file rewritten between the poll that saw it settled and the load's
// read of it is not loaded: the load waits for the next poll.
func TestWatcherPollWaitsWhenFilesChangeDuringTheLoad(t *testing.T) {
	w, file := changeDuringTheLoad(t, "domain: edge\n")

	require.NoError(t, os.WriteFile(file, []byte(limitYAML(3)), 0o600))
	_, changed, err := w.Poll()
	require.NoError(t, err)
	require.False(t, changed, "seen once")
	c, changed, err := w.Poll()
	require.NoError(t, err)
	require.True(t, changed)
	assert.EqualValues(t, 3, userLimit(t, c))
}

// changeDuringTheLoad returns a Watcher of a directory whose one file,
// edge.yaml, changed after Load, was seen changed by one poll, and was
// rewritten as data while the next poll's load read it; that poll, made
// here, loaded nothing.
func changeDuringTheLoad(t *testing.T, data string) (w *Watcher, file string) {
	t.Helper()
	dir := t.TempDir()
	file = filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.WriteFile(file, []byte(limitYAML(1)), 0o600))
	w = NewWatcher(dir, LoadOptions{})
	_, err := w.Load()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(limitYAML(2)), 0o600))
	_, changed, err := w.Poll()
	require.NoError(t, err)
	require.False(t, changed, "seen once")

	// Scan calls now once per file, before reading it: the second call of
	// the next poll is the load's, and the file changes then.
	calls := 0
	w.now = func() time.Time {
		if calls++; calls == 2 {
			require.NoError(t, os.WriteFile(file, []byte(data), 0o600))
		}
		return time.Now()
	}
	_, changed, err = w.Poll()
	require.NoError(t, err)
	require.False(t, changed, "the file the load read is not the one the polls saw settled")
	require.Equal(t, 2, calls)
	return w, file
}

// A change made while a poll's load read the files is loaded by the next
// poll if it stays, as Poll's doc says ("waits for the next poll"): the
// load's read is the first of the two looks that must agree, not a look
// that is forgotten.
func TestWatcherLoadsAChangeMadeDuringTheLoadAtTheNextPoll(t *testing.T) {
	w, _ := changeDuringTheLoad(t, limitYAML(3))

	c, changed, err := w.Poll()
	require.NoError(t, err)
	require.True(t, changed, "the same files as the load read: loaded")
	assert.EqualValues(t, 3, userLimit(t, c))
}
