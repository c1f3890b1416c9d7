package rules_test

import (
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/stretchr/testify/assert"
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
