package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testServer is a handler over an in-memory DB and a rules file in a
// temporary directory, with the client key "c" and the admin key "a".
type testServer struct {
	h     *httpapi.Server
	db    *ratedb.DB
	rules *rules.Manager
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	db, err := ratedb.Open("", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return serverOn(t, db, 10, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// serverOn is a testServer over db whose default rule allows limit a
// window, logging to log.
func serverOn(t testing.TB, db *ratedb.DB, limit int64, window time.Duration, log *slog.Logger) *testServer {
	t.Helper()
	def, err := rules.Build(rules.DefaultName, rules.Spec{ClientID: "*", Route: "*", Limit: &limit, Window: window.String()}, true)
	require.NoError(t, err)
	rm, err := rules.NewManager(rules.FileStorage{Path: filepath.Join(t.TempDir(), "r.json")}, def)
	require.NoError(t, err)
	k, err := keys.Load(keys.Source{Env: "c"}, keys.Source{Env: "a"})
	require.NoError(t, err)
	h := httpapi.New(httpapi.Options{Core: core.New(core.DBStore{DB: db}, core.Options{}), Rules: rm, Keys: k, Logger: log})
	return &testServer{h: h, db: db, rules: rm}
}

// do sends body with key and returns the status and the answer's body.
func (s *testServer) do(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// hits is the number of Hit decisions the DB made.
func (s *testServer) hits() int64 {
	st := s.db.Stats()
	return st.Allowed + st.Denied
}

// TestStrictCheck covers the bodies encoding/json alone would accept, or
// accept differently from a proxy: each is a 400 that counts nothing.
func TestStrictCheck(t *testing.T) {
	cases := map[string]struct {
		body string
		want string // in the error
	}{
		"raw 0xff":                {"{\"client_id\":\"\xff\",\"route\":\"/r\"}", "not valid UTF-8"},
		"raw 0xfe":                {"{\"client_id\":\"\xfe\",\"route\":\"/r\"}", "not valid UTF-8"},
		"raw invalid in a name":   {"{\"client_id\":\"u\",\"route\":\"/r\",\"\xff\":1}", "not valid UTF-8"},
		"lone high surrogate":     {`{"client_id":"\ud800","route":"/r"}`, "client_id must be valid UTF-8"},
		"lone low surrogate":      {`{"client_id":"u","route":"/r\udc00"}`, "route must be valid UTF-8"},
		"reversed surrogate pair": {`{"client_id":"\ude00\ud83d","route":"/r"}`, "client_id must be valid UTF-8"},
		"escaped U+FFFD":          {`{"client_id":"\ufffd","route":"/r"}`, "client_id must be valid UTF-8"},
		"literal U+FFFD":          {"{\"client_id\":\"a\uFFFDb\",\"route\":\"/r\"}", "client_id must be valid UTF-8"},
		"duplicate client_id":     {`{"client_id":"alice","client_id":"bob","route":"/r"}`, "client_id appears twice"},
		"duplicate cost":          {`{"client_id":"u","route":"/r","cost":1,"cost":2}`, "cost appears twice"},
		"duplicate by case":       {`{"client_id":"alice","CLIENT_ID":"bob","route":"/r"}`, "unknown field"},
		"wrong case":              {`{"CLIENT_ID":"alice","Route":"/r"}`, "unknown field"},
		"unknown field":           {`{"client_id":"u","route":"/r","alice@example.com":1}`, "unknown field; the fields are client_id, cost, route"},
		"object as client_id":     {`{"client_id":{"client_id":"u"},"route":"/r"}`, "client_id must not be an object or array"},
		"array body":              {`[{"client_id":"u","route":"/r"}]`, "must be a JSON object"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, _, err := httpapi.DecodeCheck([]byte(c.body))
			require.ErrorIs(t, err, httpapi.ErrBadRequest)
			assert.Contains(t, err.Error(), c.want)
			for _, v := range []string{"alice", "bob", "\xff", "\xfe", "\uFFFD"} {
				assert.NotContains(t, err.Error(), v, "the error quotes the body")
			}

			s := newTestServer(t)
			code, answer := s.do(t, http.MethodPost, "/v1/check", "c", c.body)
			assert.Equal(t, http.StatusBadRequest, code, answer)
			assert.Contains(t, answer, c.want)
			assert.Zero(t, s.hits(), "a refused body was counted")
			assert.Zero(t, s.db.Stats().WindowsInMemory, "a refused body opened a window")
		})
	}

	// The same server counts a valid body: the assertions above can fail.
	s := newTestServer(t)
	code, answer := s.do(t, http.MethodPost, "/v1/check", "c", `{"client_id":"u","route":"/r"}`)
	require.Equal(t, http.StatusOK, code, answer)
	assert.Equal(t, int64(1), s.hits())
}

// TestStrictCheckValid lists valid bodies the fast path leaves to
// encoding/json: they still decode.
func TestStrictCheckValid(t *testing.T) {
	cases := map[string]struct {
		body          string
		client, route string
		cost          int64
	}{
		"non-ASCII":          {`{"client_id":"é","route":"/r"}`, "é", "/r", 1},
		"escapes":            {`{"client_id":"\u0075\n","route":"\/r"}`, "u\n", "/r", 1},
		"surrogate pair":     {`{"client_id":"\ud83d\ude00","route":"/r"}`, "😀", "/r", 1},
		"null cost":          {`{"client_id":"u","route":"/r","cost":null}`, "u", "/r", 1},
		"reordered, escaped": {`{"cost":2,"route":"\/r","client_id":"u"}`, "u", "/r", 2},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, _, _, fast := httpapi.DecodeCheckFast([]byte(c.body))
			require.False(t, fast, "the case does not test the encoding/json path")
			client, route, cost, err := httpapi.DecodeCheck([]byte(c.body))
			require.NoError(t, err)
			assert.Equal(t, c.client, client)
			assert.Equal(t, c.route, route)
			assert.Equal(t, c.cost, cost)
		})
	}
}

// TestStrictRule covers the same bodies for PUT /v1/rules/{name}, nested
// tiers included: each is a 400 that stores nothing.
func TestStrictRule(t *testing.T) {
	const tiers = `"client_id":"*","route":"*","tiers":`
	cases := map[string]struct {
		body string
		want string
	}{
		"raw 0xff":             {"{\"client_id\":\"\xff*\",\"route\":\"*\",\"limit\":5,\"window\":\"1m\"}", "not valid UTF-8"},
		"lone surrogate":       {`{"client_id":"\ud800*","route":"*","limit":5,"window":"1m"}`, "client_id must be valid UTF-8"},
		"literal U+FFFD":       {"{\"client_id\":\"*\",\"route\":\"/\uFFFD\",\"limit\":5,\"window\":\"1m\"}", "route must be valid UTF-8"},
		"duplicate limit":      {`{"client_id":"*","route":"*","limit":5,"limit":500,"window":"1m"}`, "limit appears twice"},
		"duplicate tiers":      {`{` + tiers + `[{"limit":1,"window":"1m"}],"tiers":[{"limit":9,"window":"1m"}]}`, "tiers appears twice"},
		"wrong case":           {`{"client_id":"*","route":"*","Limit":5,"window":"1m"}`, "unknown field"},
		"unknown field":        {`{"client_id":"*","route":"*","limit":5,"window":"1m","alice@example.com":1}`, "unknown field; the fields are algorithm, client_id, limit, route, tiers, window"},
		"tier duplicate":       {`{` + tiers + `[{"limit":1,"window":"1m"},{"limit":3,"window":"15m","window":"1s"}]}`, "tiers[1].window appears twice"},
		"tier wrong case":      {`{` + tiers + `[{"LIMIT":1,"window":"1m"}]}`, "unknown field in tiers[0]"},
		"tier unknown field":   {`{` + tiers + `[{"limit":1,"window":"1m","alice":1}]}`, "unknown field in tiers[0]; the fields are limit, window"},
		"tier lone surrogate":  {`{` + tiers + `[{"limit":1,"window":"1m\udfff"}]}`, "tiers[0].window must be valid UTF-8"},
		"tier is not object":   {`{` + tiers + `[[{"limit":1,"window":"1m"}]]}`, "tiers[0] must be an object"},
		"tiers is an object":   {`{` + tiers + `{"limit":1,"window":"1m"}}`, "tiers must be an array"},
		"object as a scalar":   {`{"client_id":"*","route":"*","limit":{"limit":5},"window":"1m"}`, "limit must not be an object or array"},
		"malformed in a tier":  {`{` + tiers + `[{"limit":1,"window":"1m"`, "cut short"},
		"string is not a body": {`"alice"`, "must be a JSON object"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := httpapi.DecodeRule("r1", []byte(c.body))
			require.ErrorIs(t, err, rules.ErrInvalidRule)
			assert.Contains(t, err.Error(), c.want)
			for _, v := range []string{"alice", "\xff", "\uFFFD"} {
				assert.NotContains(t, err.Error(), v, "the error quotes the body")
			}

			s := newTestServer(t)
			code, answer := s.do(t, http.MethodPut, "/v1/rules/r1", "a", c.body)
			assert.Equal(t, http.StatusBadRequest, code, answer)
			assert.Contains(t, answer, c.want)
			_, stored := s.rules.Current().Get("r1")
			assert.False(t, stored, "a refused body was stored")
		})
	}

	// The same server stores a valid body: the assertions above can fail.
	s := newTestServer(t)
	code, answer := s.do(t, http.MethodPut, "/v1/rules/r1", "a", `{`+tiers+`[{"limit":1,"window":"1m"},null,{"limit":3,"window":"15m"}]}`)
	require.Equal(t, http.StatusBadRequest, code, answer) // a null tier decodes to a tier without a limit
	code, answer = s.do(t, http.MethodPut, "/v1/rules/r1", "a", `{`+tiers+`[{"limit":1,"window":"1m"},{"limit":3,"window":"15m"}],"algorithm":null}`)
	require.Equal(t, http.StatusCreated, code, answer)
	_, stored := s.rules.Current().Get("r1")
	assert.True(t, stored)
}
