package envoyconf

// Tests added after mutation testing (TestGap...): each fails with one
// deliberate bug that the rest of the package's tests let through.

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A change made while a poll's load read the files is loaded by the next
// poll if it stays, as Poll's doc says ("waits for the next poll"): the
// load's read is the first of the two looks that must agree, not a look
// that is forgotten.
func TestGapWatcherLoadsAChangeMadeDuringTheLoadAtTheNextPoll(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.WriteFile(file, []byte(limitYAML(1)), 0o600))
	w := NewWatcher(dir, LoadOptions{})
	_, err := w.Load()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, []byte(limitYAML(2)), 0o600))
	_, changed, err := w.Poll()
	require.NoError(t, err)
	require.False(t, changed, "seen once")

	// As in TestWatcherPollWaitsWhenFilesChangeDuringTheLoad: the second
	// call of now is the load's, and the file changes then.
	calls := 0
	w.now = func() time.Time {
		if calls++; calls == 2 {
			require.NoError(t, os.WriteFile(file, []byte(limitYAML(3)), 0o600))
		}
		return time.Now()
	}
	_, changed, err = w.Poll()
	require.NoError(t, err)
	require.False(t, changed, "changed while the load read it")
	require.Equal(t, 2, calls)

	c, changed, err := w.Poll()
	require.NoError(t, err)
	require.True(t, changed, "the same files as the load read: loaded")
	assert.EqualValues(t, 3, userLimit(t, c))
}
