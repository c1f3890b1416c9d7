package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Writing a layered rule's tiers in another order changes neither its
// limits nor its windows, so it must keep the counts (README: only a change
// of the window(s) or algorithm starts new windows; the stores already keep
// the same tiers in any order as one counter). The generation grew instead,
// and a client the rule denied was admitted again, its quota reset.
func TestReorderingTiersKeepsTheCounts(t *testing.T) {
	s := newTestServer(t)
	put := func(body string) {
		code, answer := s.do(t, http.MethodPut, "/v1/rules/tiered", "a", body)
		require.Contains(t, []int{http.StatusOK, http.StatusCreated}, code, answer)
	}
	check := func() string {
		code, answer := s.do(t, http.MethodPost, "/v1/check", "c", `{"client_id":"u","route":"/r"}`)
		require.Equal(t, http.StatusOK, code, answer)
		return answer
	}
	put(`{"client_id":"u","route":"*","tiers":[{"limit":2,"window":"1h"},{"limit":5,"window":"2h"}]}`)
	check()
	check()
	require.Contains(t, check(), `"status":"Deny"`)
	before, ok := s.rules.Current().Get("tiered")
	require.True(t, ok)

	put(`{"client_id":"u","route":"*","tiers":[{"limit":5,"window":"2h"},{"limit":2,"window":"1h"}]}`)
	r, ok := s.rules.Current().Get("tiered")
	require.True(t, ok)
	assert.Equal(t, before.Generation, r.Generation, "the same tiers in another order are no change of windows")
	assert.Contains(t, check(), `"status":"Deny"`, "the client's quota was reset")
}
