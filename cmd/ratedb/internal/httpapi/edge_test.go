package httpapi_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// A number beyond float64's range is refused (400), but the message must
// name the field at fault, as the README says decoding errors do. It read
// "field  must be a float64": no field named, and a type the API never
// documents (encoding/json's Decoder.Token decodes every number into a
// float64 and reports the overflow with an empty Field).
func TestOutOfRangeNumberNamesItsField(t *testing.T) {
	checks := map[string]string{
		"cost":      `{"client_id":"u","route":"/r","cost":1e400}`,
		"client_id": `{"client_id":-1e400,"route":"/r"}`,
	}
	for field, body := range checks {
		_, _, _, err := httpapi.DecodeCheck([]byte(body))
		require.Error(t, err, body)
		assert.True(t, errors.Is(err, httpapi.ErrBadRequest), body)
		assert.Contains(t, err.Error(), field, "check body %s", body)
		assert.NotContains(t, err.Error(), "float64", "check body %s", body)
	}
	_, _, _, err := httpapi.DecodeCheck([]byte(`1e400`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the body must be a JSON object")
	ruleBodies := map[string]string{
		"limit":          `{"client_id":"*","route":"*","limit":1e400,"window":"1s"}`,
		"tiers[0].limit": `{"client_id":"*","route":"*","tiers":[{"limit":1e400,"window":"1s"}]}`,
		"tiers[0]":       `{"client_id":"*","route":"*","tiers":[1e400]}`,
	}
	for field, body := range ruleBodies {
		_, err := httpapi.DecodeRule("r", []byte(body))
		var ve *rules.ValidationError
		require.ErrorAs(t, err, &ve, body)
		msg := strings.Join(ve.Problems, "; ")
		assert.Contains(t, msg, field, "rule body %s", body)
		assert.NotContains(t, msg, "float64", "rule body %s", body)
	}
}

// /metrics answers GET and HEAD; any other method gets 405 with an Allow
// header, as every other path does (README, error table: "405 another
// method (the Allow header says which)"). It answered 200 with the metrics
// to POST, PUT, DELETE, PATCH, OPTIONS...
func TestMetricsRefusesOtherMethods(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("# metrics\n"))
	})
	s := httpapi.New(httpapi.Options{Metrics: metrics})
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(m, "/metrics", nil))
		assert.Equal(t, http.StatusOK, rec.Code, m)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(m, "/metrics", strings.NewReader("x")))
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, m)
		assert.Equal(t, "GET, HEAD", rec.Header().Get("Allow"), m)
		assert.NotContains(t, rec.Body.String(), "# metrics", m)
	}
}

// GET /v1/rules/default answers the default rule, so DELETE of it must not
// answer "no such rule" (404, README: "404 if there is none"): it is a 400
// saying why it cannot be deleted, and the default rule still applies.
func TestDeleteDefaultRuleIsRefusedNotMissing(t *testing.T) {
	s := newTestServer(t)
	code, resp := s.do(t, http.MethodGet, "/v1/rules/default", "a", "")
	require.Equal(t, http.StatusOK, code, resp)
	code, resp = s.do(t, http.MethodDelete, "/v1/rules/default", "a", "")
	assert.Equal(t, http.StatusBadRequest, code, resp)
	assert.Contains(t, resp, "--default-*")
	assert.Contains(t, resp, `"status":"error"`)
	code, resp = s.do(t, http.MethodGet, "/v1/rules/default", "a", "")
	assert.Equal(t, http.StatusOK, code, resp)
	// Another rule that does not exist is still 404.
	code, resp = s.do(t, http.MethodDelete, "/v1/rules/nothing", "a", "")
	assert.Equal(t, http.StatusNotFound, code, resp)
}
