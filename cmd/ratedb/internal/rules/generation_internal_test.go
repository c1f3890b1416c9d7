package rules

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rule created under the name of a deleted one starts new windows, whatever
// the deleted rule's history: a new rule's generation is its creation time,
// never one the deleted rule had. (With generations counted from 0, a rule
// changed from 1h to 1m (generation 1), deleted and created again as 1h
// (generation 0) found the first version's exhausted counts.)
func TestRuleCreatedAgainStartsNewWindows(t *testing.T) {
	def := gapRule(t, DefaultName, Spec{ClientID: "*", Route: "*", Limit: gapLimit(1), Window: "1m"})
	m, err := NewManager(FileStorage{Path: filepath.Join(t.TempDir(), "r.json")}, def)
	require.NoError(t, err)
	ms := int64(1_795_000_000_000_000) // µs
	m.now = func() time.Time { return time.UnixMicro(ms) }
	var keys []string
	put := func(window string) {
		t.Helper()
		_, err := m.Put(gapRule(t, "r", Spec{ClientID: "c", Route: "*", Limit: gapLimit(3), Window: window}))
		require.NoError(t, err)
		r, ok := m.Current().Get("r")
		require.True(t, ok)
		k := r.Key("c", "/x")
		assert.NotContains(t, keys, k, "a counted key of an earlier version of the rule")
		keys = append(keys, k)
	}
	put("1h")
	ms++
	put("1m") // a window change: generation + 1
	require.NoError(t, m.Delete("r"))
	ms++
	put("1h")
	assert.Len(t, keys, 3)
}

// Turning a single-window rule into a layered one (same window) starts new
// windows: the generation grows.
func TestLayeredChangeBumpsGeneration(t *testing.T) {
	def := gapRule(t, DefaultName, Spec{ClientID: "*", Route: "*", Limit: gapLimit(1), Window: "1m"})
	m, err := NewManager(FileStorage{Path: filepath.Join(t.TempDir(), "r.json")}, def)
	require.NoError(t, err)
	m.now = func() time.Time { return time.UnixMicro(1000) }
	_, err = m.Put(gapRule(t, "a", Spec{ClientID: "c", Route: "r", Limit: gapLimit(5), Window: "1m"}))
	require.NoError(t, err)
	_, err = m.Put(gapRule(t, "a", Spec{ClientID: "c", Route: "r", Tiers: []TierSpec{{Limit: gapLimit(5), Window: "1m"}}}))
	require.NoError(t, err)
	r, _ := m.Current().Get("a")
	require.True(t, r.Layered)
	assert.EqualValues(t, 1001, r.Generation)
}

// Changing only a rule's algorithm (same window and limit) starts new
// windows: the generation grows, as Rule.Generation's doc says.
func TestAlgorithmChangeBumpsGeneration(t *testing.T) {
	def := gapRule(t, DefaultName, Spec{ClientID: "*", Route: "*", Limit: gapLimit(1), Window: "1m"})
	m, err := NewManager(FileStorage{Path: filepath.Join(t.TempDir(), "r.json")}, def)
	require.NoError(t, err)
	m.now = func() time.Time { return time.UnixMicro(1000) }
	_, err = m.Put(gapRule(t, "a", Spec{ClientID: "c", Route: "r", Algorithm: "fixed", Limit: gapLimit(5), Window: "1m"}))
	require.NoError(t, err)
	_, err = m.Put(gapRule(t, "a", Spec{ClientID: "c", Route: "r", Algorithm: "per_key", Limit: gapLimit(5), Window: "1m"}))
	require.NoError(t, err)
	r, _ := m.Current().Get("a")
	assert.EqualValues(t, 1001, r.Generation)
}
