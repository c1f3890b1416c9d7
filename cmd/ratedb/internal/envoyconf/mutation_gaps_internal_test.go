package envoyconf

// Tests added after mutation testing (TestGap...): each fails with one
// deliberate bug that the rest of the package's tests let through.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A change made while a poll's load read the files is loaded by the next
// poll if it stays, as Poll's doc says ("waits for the next poll"): the
// load's read is the first of the two looks that must agree, not a look
// that is forgotten.
func TestGapWatcherLoadsAChangeMadeDuringTheLoadAtTheNextPoll(t *testing.T) {
	w, _ := changeDuringTheLoad(t, limitYAML(3))

	c, changed, err := w.Poll()
	require.NoError(t, err)
	require.True(t, changed, "the same files as the load read: loaded")
	assert.EqualValues(t, 3, userLimit(t, c))
}
