package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Wildcard precedence counts literal characters, as the README says ("the
// most literal (non-*) characters in client_id", "7 literal characters"),
// not bytes: "*abc*" (3 literal characters) beats "*éé*" (2 characters, 4
// bytes). Counting bytes, a non-ASCII pattern won against a more specific
// ASCII one, and the check was counted under the other rule's limit.
func TestWildcardPrecedenceCountsCharactersNotBytes(t *testing.T) {
	s := newTestServer(t)
	for name, body := range map[string]string{
		"accents": `{"client_id":"*éé*","route":"*","limit":7,"window":"1h"}`,
		"ascii":   `{"client_id":"*abc*","route":"*","limit":3,"window":"1h"}`,
	} {
		code, answer := s.do(t, http.MethodPut, "/v1/rules/"+name, "a", body)
		require.Equal(t, http.StatusCreated, code, answer)
	}
	q := url.Values{"client_id": {"ééabc"}, "route": {"/r"}}
	code, answer := s.do(t, http.MethodGet, "/v1/rules/match?"+q.Encode(), "a", "")
	require.Equal(t, http.StatusOK, code, answer)
	assert.Contains(t, answer, `"name":"ascii"`)
	assert.Contains(t, answer, "3 literal characters in client_id")

	code, answer = s.do(t, http.MethodPost, "/v1/check", "c", `{"client_id":"ééabc","route":"/r"}`)
	require.Equal(t, http.StatusOK, code, answer)
	assert.Contains(t, answer, `"limit":3,`)
}

// GET /v1/rules/match says which rule applies to a check; a client_id or
// route that no check can carry (not valid UTF-8, or holding U+FFFD: the
// check API answers 400) gets 400 too, not a rule. It answered 200 with the
// default rule, or with a wildcard rule, for ids the check API refuses.
func TestMatchRefusesIDsNoCheckCanCarry(t *testing.T) {
	s := newTestServer(t)
	for _, bad := range []string{"\xff", "a\xc3", "\uFFFD", "x\uFFFDy"} {
		for _, q := range []url.Values{
			{"client_id": {bad}, "route": {"/r"}},
			{"client_id": {"u"}, "route": {bad}},
		} {
			code, answer := s.do(t, http.MethodGet, "/v1/rules/match?"+q.Encode(), "a", "")
			assert.Equal(t, http.StatusBadRequest, code, "%q: %s", q.Encode(), answer)
			assert.Contains(t, answer, "U+FFFD", q.Encode())
			assert.NotContains(t, answer, `"rule"`, q.Encode())
		}
		code, answer := s.do(t, http.MethodPost, "/v1/check", "c", `{"client_id":"`+bad+`","route":"/r"}`)
		assert.Equal(t, http.StatusBadRequest, code, "the check API refuses %q too: %s", bad, answer)
	}
	q := url.Values{"client_id": {"é"}, "route": {"/r"}}
	code, answer := s.do(t, http.MethodGet, "/v1/rules/match?"+q.Encode(), "a", "")
	assert.Equal(t, http.StatusOK, code, answer)
}

// A query string that does not parse (a ';', or a '%' not followed by two
// hex digits, as an unencoded client id may hold) gets 400 saying so, not
// "client_id must be 1 to 512 bytes": r.URL.Query dropped the pair, and the
// answer blamed an id the request did give. The answer quotes no id.
func TestMatchNamesAMalformedQuery(t *testing.T) {
	s := newTestServer(t)
	for _, raw := range []string{"client_id=alice;x&route=/r", "client_id=alice%zz&route=/r", "client_id=u&route=/alice;x"} {
		code, answer := s.do(t, http.MethodGet, "/v1/rules/match?"+raw, "a", "")
		assert.Equal(t, http.StatusBadRequest, code, "%s: %s", raw, answer)
		assert.Contains(t, answer, "the query string is malformed", raw)
		assert.NotContains(t, answer, "must be 1 to", raw)
		assert.NotContains(t, answer, "alice", raw)
	}
	q := url.Values{"client_id": {"alice;x%zz"}, "route": {"/r"}}
	code, answer := s.do(t, http.MethodGet, "/v1/rules/match?"+q.Encode(), "a", "")
	assert.Equal(t, http.StatusOK, code, "encoded, the same ids are answered: %s", answer)
}
