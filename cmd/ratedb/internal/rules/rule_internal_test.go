package rules

import (
	"testing"

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

// The counted key's documented format: NAME#GENERATION|len(CLIENT)|CLIENT|ROUTE.
func TestKeyFormat(t *testing.T) {
	r := gapRule(t, "n", Spec{ClientID: "*", Route: "*", Limit: gapLimit(1), Window: "1m"})
	assert.Equal(t, "n#0|2|ab|route", r.Key("ab", "route"))
}
