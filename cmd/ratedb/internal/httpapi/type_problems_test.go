package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
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
