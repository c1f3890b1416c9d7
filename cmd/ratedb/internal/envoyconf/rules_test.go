package envoyconf_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// Rules gives every rule its own Descriptor: siblings four levels deep,
// where appending to the parent's path could write into one shared array,
// keep their own last entry.
func TestRulesDeepSiblingsKeepTheirOwnDescriptor(t *testing.T) {
	c, err := envoyconf.Parse([]envoyconf.File{{Name: "f.yaml", Data: []byte(`domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        descriptors:
          - key: c
            value: "1"
            descriptors:
              - {key: x, rate_limit: {unit: second, requests_per_unit: 1}}
              - {key: y, rate_limit: {unit: second, requests_per_unit: 2}}
`)}})
	require.NoError(t, err)
	rules := c.Rules()
	require.Len(t, rules, 2)
	assert.Equal(t, kv("a", "", "b", "", "c", "1", "x", ""), rules[0].Descriptor)
	assert.Equal(t, kv("a", "", "b", "", "c", "1", "y", ""), rules[1].Descriptor)
	assert.EqualValues(t, 1, rules[0].Limit.RequestsPerUnit)
}
