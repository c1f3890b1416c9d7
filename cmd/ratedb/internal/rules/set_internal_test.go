package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Exact rules on the same client_id and route: the smallest name wins,
// whatever order the rules come in.
func TestExactTieSmallestName(t *testing.T) {
	def := gapRule(t, DefaultName, Spec{ClientID: "*", Route: "*", Limit: gapLimit(1), Window: "1m"})
	a := gapRule(t, "a", Spec{ClientID: "c", Route: "r", Limit: gapLimit(1), Window: "1m"})
	b := gapRule(t, "b", Spec{ClientID: "c", Route: "r", Limit: gapLimit(2), Window: "1m"})
	for _, order := range [][]*Rule{{a, b}, {b, a}} {
		got, _ := newSet(order, def).Match("c", "r")
		assert.Equal(t, "a", got.Name)
	}
}
