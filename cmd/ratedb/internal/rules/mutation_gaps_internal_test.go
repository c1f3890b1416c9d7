package rules

// Tests added after mutation testing (TestGap...): each fails with one
// deliberate bug that the rest of the suite let through.

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gapRule(t *testing.T, name string, spec Spec) *Rule {
	t.Helper()
	r, err := Build(name, spec, name == DefaultName)
	require.NoError(t, err)
	return r
}

func gapLimit(v int64) *int64 { return &v }

// Exact rules on the same client_id and route: the smallest name wins,
// whatever order the rules come in.
func TestGapExactTieSmallestName(t *testing.T) {
	def := gapRule(t, DefaultName, Spec{ClientID: "*", Route: "*", Limit: gapLimit(1), Window: "1m"})
	a := gapRule(t, "a", Spec{ClientID: "c", Route: "r", Limit: gapLimit(1), Window: "1m"})
	b := gapRule(t, "b", Spec{ClientID: "c", Route: "r", Limit: gapLimit(2), Window: "1m"})
	for _, order := range [][]*Rule{{a, b}, {b, a}} {
		got, _ := newSet(order, def).Match("c", "r")
		assert.Equal(t, "a", got.Name)
	}
}

// Turning a single-window rule into a layered one (same window) starts new
// windows: the generation grows.
func TestGapLayeredChangeBumpsGeneration(t *testing.T) {
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

// The counted key's documented format: NAME#GENERATION|len(CLIENT)|CLIENT|ROUTE.
func TestGapKeyFormat(t *testing.T) {
	r := gapRule(t, "n", Spec{ClientID: "*", Route: "*", Limit: gapLimit(1), Window: "1m"})
	assert.Equal(t, "n#0|2|ab|route", r.Key("ab", "route"))
}

// Changing only a rule's algorithm (same window and limit) starts new
// windows: the generation grows, as Rule.Generation's doc says.
func TestGapAlgorithmChangeBumpsGeneration(t *testing.T) {
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
