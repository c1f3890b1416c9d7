package rules_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A limit that is not an integer is refused by the rules API (400), and must
// be refused by a rule file too. yaml.v3 truncates a float into an int64
// field: "limit: 0.5" became limit 0 (deny all), "limit: 99.9" became 99,
// and the service started.
func TestRuleFileRefusesFractionalLimits(t *testing.T) {
	for _, doc := range []string{
		"rules:\n  - {name: a, client_id: \"*\", route: \"*\", limit: 0.5, window: 1m}\n",
		"rules:\n  - {name: a, client_id: \"*\", route: \"*\", limit: 99.9, window: 1m}\n",
		"rules:\n  - {name: a, client_id: \"*\", route: \"*\", tiers: [{limit: 1.5, window: 1m}]}\n",
		`{"rules":[{"name":"a","client_id":"*","route":"*","limit":0.5,"window":"1m"}]}`,
	} {
		rs, err := rules.ParseFile([]byte(doc))
		if !assert.ErrorIs(t, err, rules.ErrInvalidRule, doc) {
			t.Logf("accepted as limit %d", rs[0].Tiers[0].Limit)
		}
	}
}

// A rule of more than MaxTiers tiers is refused for their number, and only
// its first MaxTiers tiers are checked, as its problem says ("only the first
// 16 are checked"). The file's check of integer limits went through every
// tier: a rule of 1,000 tiers of "limit: 0.5" drew 1,000 problems, down to
// rules[0].tiers[999].limit.
func TestRuleFileOfManyTiersChecksTheFirstOnly(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n  - name: a\n    client_id: \"*\"\n    route: \"*\"\n    tiers:\n")
	const n = 1000
	for j := range n {
		fmt.Fprintf(&b, "      - {limit: 0.5, window: %dm}\n", j+1)
	}
	_, err := rules.ParseFile([]byte(b.String()))
	var ve *rules.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Contains(t, ve.Problems, fmt.Sprintf("rules[0] (a): %d tiers, at most %d (only the first %d are checked)", n, rules.MaxTiers, rules.MaxTiers))
	assert.Contains(t, ve.Problems, fmt.Sprintf("rules[0].tiers[%d].limit is not an integer", rules.MaxTiers-1))
	for _, p := range ve.Problems {
		assert.NotContains(t, p, fmt.Sprintf("tiers[%d]", rules.MaxTiers))
	}
	assert.Len(t, ve.Problems, rules.MaxTiers+1)
}
