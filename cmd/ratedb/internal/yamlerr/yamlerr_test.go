package yamlerr_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml2 "gopkg.in/yaml.v2"
	yaml3 "gopkg.in/yaml.v3"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/yamlerr"
)

type doc struct {
	Rules []struct {
		Limit int64 `yaml:"limit"`
	} `yaml:"rules"`
}

// Describe keeps the line and the reason of every kind of error both
// parsers return, and quotes nothing of the document.
func TestDescribeQuotesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want3      string // yaml.v3, strict, into doc
		want2      string // yaml.v2 into map[any]any
	}{
		{"scalar", "# c\nSECRET-one\nSECRET-two\n", "line 2: cannot unmarshal !!str into yamlerr_test.doc", "line 2: cannot unmarshal !!str into map[interface {}]interface {}"},
		{"unknown field", "SECRET: x\n", "line 1: unknown field in yamlerr_test.doc", ""},
		{"wrong type", "rules:\n  - limit: SECRET\n", "line 2: cannot unmarshal !!str into int64", ""},
		{"custom tag", "!SECRET x\n", "line 1: cannot unmarshal a value into yamlerr_test.doc", "line 1: cannot unmarshal a value into map[interface {}]interface {}"},
		{"repeated key", "SECRET: 1\nSECRET: 2\n", "line 2: a mapping key repeats the one at line 1", ""},
		{"unknown anchor", "*SECRET\n", "an alias of an anchor that is unknown or contains itself", "an alias of an anchor that is unknown or contains itself"},
		{"syntax", "a: [SECRET\n", "line 1: did not find expected ',' or ']'", "line 1: did not find expected ',' or ']'"},
		{"unterminated quote", "\"SECRET\n", "line 2: found unexpected end of stream", "line 2: found unexpected end of stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			dec := yaml3.NewDecoder(strings.NewReader(tc.data))
			dec.KnownFields(true)
			err := dec.Decode(&d)
			require.Error(t, err)
			got := yamlerr.Describe(err)
			assert.Equal(t, tc.want3, got, "raw: %v", err)
			assert.NotContains(t, got, "SECRE")
			m := map[any]any{}
			err = yaml2.Unmarshal([]byte(tc.data), &m)
			if tc.want2 == "" {
				return
			}
			require.Error(t, err)
			got = yamlerr.Describe(err)
			assert.Equal(t, tc.want2, got, "raw: %v", err)
			assert.NotContains(t, got, "SECRE")
		})
	}
}

// Entry describes an entry it does not know without quoting it.
func TestEntryUnknown(t *testing.T) {
	assert.Equal(t, "line 3: a value that cannot be read", yamlerr.Entry("line 3: something new about `SECRET`"))
	assert.Equal(t, "a value that cannot be read", yamlerr.Entry("SECRET"))
	assert.Equal(t, "line 3: cannot unmarshal !!str", yamlerr.Entry("line 3: cannot unmarshal !!str `x into \"y` into SECRET\"z"))
}
