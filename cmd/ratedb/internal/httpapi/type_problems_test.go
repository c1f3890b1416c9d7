package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// README, 400 row: "every problem with the fields' values is listed; a
// malformed body, an unknown or repeated member is reported alone". A value
// of the wrong type is a problem with a field's value, yet it was reported
// alone: encoding/json returns only the first type error, and the other
// fields were never validated.
func TestCheckListsTypeProblemsWithTheOthers(t *testing.T) {
	for body, want := range map[string][]string{
		`{"client_id":"","route":"/r","cost":"2"}`:  {"client_id", "cost"},
		`{"client_id":5,"route":"","cost":0}`:       {"client_id", "route", "cost"},
		`{"client_id":"u","route":true,"cost":1.5}`: {"route", "cost"},
	} {
		_, _, _, err := httpapi.DecodeCheck([]byte(body))
		require.Error(t, err, body)
		for _, field := range want {
			assert.Contains(t, err.Error(), field, body)
		}
	}
	s := newTestServer(t)
	code, resp := s.do(t, http.MethodPost, "/v1/check", "c", `{"client_id":"","route":"/r","cost":"2"}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, resp, "client_id is missing or empty", resp)
}

// The same for a rule: "validation reports every problem at once".
func TestRuleListsTypeProblemsWithTheOthers(t *testing.T) {
	s := newTestServer(t)
	code, resp := s.do(t, http.MethodPut, "/v1/rules/r", "a", `{"client_id":5,"route":"","limit":-1,"window":"x"}`)
	assert.Equal(t, http.StatusBadRequest, code)
	for _, p := range []string{"client_id", "route is empty", "limit -1", "window"} {
		assert.Contains(t, resp, p)
	}
}

// Every value of the wrong type in a rule is reported, by its place, and
// none as missing: encoding/json reports only the first, so a second one
// read as missing ("route is empty" for "route":true, "window is missing"
// for "window":60), and in "tiers" the first hid every other tier's
// problems and was named without its index ("tiers.limit").
func TestRuleReportsEveryTypeProblemByItsPlace(t *testing.T) {
	cases := map[string]struct {
		body        string
		want, never []string
	}{
		"two top-level": {
			`{"client_id":5,"route":true,"limit":1,"window":"1s"}`,
			[]string{"client_id must be a string", "route must be a string"},
			[]string{"route is empty"},
		},
		"limit and window": {
			`{"client_id":"x","route":"*","limit":"5","window":60}`,
			[]string{"limit must be an integer from 0 to 1099511627776", "window must be a string holding a duration"},
			[]string{"missing", "int64"},
		},
		"in tiers": {
			`{"client_id":"x","route":"*","tiers":[{"limit":1.5,"window":"1m"},{"limit":-2,"window":"1m"},{"limit":1,"window":true}]}`,
			[]string{"tiers[0].limit must be an integer", "tiers[1].limit -2 is not between", "tiers[2].window must be a string"},
			[]string{"tiers.limit", "missing", "int64"},
		},
		"tiers not an array": {
			`{"client_id":"x","route":"*","tiers":7}`,
			[]string{"tiers must be an array of objects with limit and window"},
			[]string{"missing", "TierSpec"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newTestServer(t)
			code, resp := s.do(t, http.MethodPut, "/v1/rules/r", "a", c.body)
			require.Equal(t, http.StatusBadRequest, code, resp)
			for _, p := range c.want {
				assert.Contains(t, resp, p)
			}
			for _, p := range c.never {
				assert.NotContains(t, resp, p)
			}
			_, stored := s.rules.Current().Get("r")
			assert.False(t, stored)
		})
	}
}

// A rule body of thousands of tiers, within MaxRuleBody, is answered with a
// few problems: that there are too many, and those of the first MaxTiers.
// Every tier's problems were listed (twice: in the message and in
// data.problems), so a 60 KiB body of "{}" tiers drew a 3.7 MB answer, and
// one of mistyped tiers 0.7 MB.
func TestRuleWithThousandsOfTiersIsAnsweredBriefly(t *testing.T) {
	for name, tier := range map[string]string{
		"empty":    `{}`,
		"null":     `null`,
		"mistyped": `{"limit":"","window":0}`,
		"repeated": `{"limit":1,"window":"1s"}`,
	} {
		t.Run(name, func(t *testing.T) {
			n := (httpapi.MaxRuleBody - 100) / (len(tier) + 1)
			body := `{"client_id":"x","route":"*","tiers":[` + strings.Repeat(tier+",", n-1) + tier + `]}`
			require.LessOrEqual(t, len(body), httpapi.MaxRuleBody)
			s := newTestServer(t)
			code, resp := s.do(t, http.MethodPut, "/v1/rules/r", "a", body)
			require.Equal(t, http.StatusBadRequest, code)
			var answer struct {
				Data struct {
					Problems []string `json:"problems"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal([]byte(resp), &answer))
			problems := answer.Data.Problems
			require.NotEmpty(t, problems)
			assert.Contains(t, problems, fmt.Sprintf("%d tiers, at most %d (only the first %d are checked)", n, rules.MaxTiers, rules.MaxTiers))
			assert.LessOrEqual(t, len(problems), 3*rules.MaxTiers+1, "problems: %d", len(problems))
			for _, p := range problems {
				assert.NotContains(t, p, fmt.Sprintf("tiers[%d]", rules.MaxTiers))
			}
			assert.Less(t, len(resp), 16<<10)
			_, stored := s.rules.Current().Get("r")
			assert.False(t, stored)
		})
	}
}
