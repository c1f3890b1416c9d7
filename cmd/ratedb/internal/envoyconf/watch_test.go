package envoyconf_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// A change is loaded by the poll after the one that first saw it, if the
// files stayed the same in between: a file rewritten in place and polled
// half-written is not loaded, where its valid prefix (the domain line
// alone) would have left the domain without limits. Load (SIGHUP) loads
// at once.
func TestWatcherPollLoadsAChangeOnlyOnceItHasSettled(t *testing.T) {
	const (
		v1 = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
		v2 = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 2}\n" +
			"  - key: ip\n    rate_limit: {unit: hour, requests_per_unit: 2}\n"
		v3 = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n"
	)
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	write := func(data string) { require.NoError(t, os.WriteFile(file, []byte(data), 0o600)) } // in place
	poll := func(w *envoyconf.Watcher) (*envoyconf.Config, bool) {
		t.Helper()
		c, changed, err := w.Poll()
		require.NoError(t, err)
		return c, changed
	}
	write(v1)
	w := envoyconf.NewWatcher(dir, envoyconf.LoadOptions{})
	c, err := w.Load()
	require.NoError(t, err)
	require.Len(t, c.Rules(), 1)

	write("domain: edge\n") // the writer has truncated the file and written its first line
	_, changed := poll(w)
	assert.False(t, changed, "a change seen once is not loaded")
	write(v2) // the writer is done
	_, changed = poll(w)
	assert.False(t, changed, "the files changed since the previous poll")
	c, changed = poll(w)
	require.True(t, changed, "the same files two polls in a row")
	assert.Len(t, c.Rules(), 2)
	_, changed = poll(w)
	assert.False(t, changed, "nothing new")

	t.Run("a settled invalid file is reported once", func(t *testing.T) {
		write("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 9}\n")
		_, changed, err := w.Poll()
		require.NoError(t, err)
		require.False(t, changed)
		_, changed, err = w.Poll()
		require.True(t, changed)
		require.ErrorIs(t, err, envoyconf.ErrInvalidConfig)
		_, changed, err = w.Poll()
		require.NoError(t, err)
		assert.False(t, changed, "not retried until it changes")
	})
	t.Run("Load loads at once", func(t *testing.T) {
		write(v3)
		c, err := w.Load()
		require.NoError(t, err)
		require.Len(t, c.Rules(), 1)
		assert.EqualValues(t, 3, c.Rules()[0].Limit.RequestsPerUnit)
		_, changed := poll(w)
		assert.False(t, changed, "what Load read is what later polls compare with")
	})
}

// A Watcher's Load that fails because a file cannot be read (a dangling
// symlink) is, like one that fails to parse, the version later polls
// compare with: they do not report the same failure again, and report the
// fix once it has settled.
func TestWatcherPollsDoNotRepeatAFailedLoad(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: a\n"), 0o600))
	w := envoyconf.NewWatcher(dir, envoyconf.LoadOptions{})
	_, err := w.Load()
	require.NoError(t, err)
	link := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.Symlink("missing.yaml", link))
	_, err = w.Load() // SIGHUP
	require.ErrorIs(t, err, os.ErrNotExist)
	for range 3 {
		_, changed, err := w.Poll()
		require.NoError(t, err)
		require.False(t, changed, "the failure Load reported")
	}

	require.NoError(t, os.Remove(link))
	_, changed, err := w.Poll()
	require.NoError(t, err)
	require.False(t, changed, "seen once")
	c, changed, err := w.Poll()
	require.NoError(t, err)
	require.True(t, changed)
	assert.Equal(t, []string{"a.yaml"}, c.Files())
}
