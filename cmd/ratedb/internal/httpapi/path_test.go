package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// README: "404 an unknown path", and errors answer JSON with the meta
// shape. A path that is not one of the API's but cleans to one
// ("/v1//check", "/v1/./check", "/x/../v1/rules/r") was answered by
// net/http's ServeMux with a redirect (307 for POST/PUT/DELETE, 301 for
// GET) and no JSON body, and a client that follows redirects has the check
// counted or the rule changed.
func TestUncleanPathsAre404NotRedirects(t *testing.T) {
	s := newTestServer(t)
	for _, c := range []struct{ method, path, key, body string }{
		{http.MethodPost, "/v1//check", "c", `{"client_id":"u","route":"/r"}`},
		{http.MethodPost, "/v1/./check", "c", `{"client_id":"u","route":"/r"}`},
		{http.MethodPut, "/x/../v1/rules/r", "a", `{"client_id":"*","route":"*","limit":1,"window":"1m"}`},
		{http.MethodGet, "//v1/rules", "a", ``},
	} {
		code, body := s.do(t, c.method, c.path, c.key, c.body)
		assert.Equal(t, http.StatusNotFound, code, "%s %s", c.method, c.path)
		assert.Contains(t, body, `"status":"error"`, "%s %s", c.method, c.path)
	}
}
