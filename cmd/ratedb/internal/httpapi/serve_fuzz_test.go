package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
)

// FuzzServe sends the API arbitrary requests (method, path, rule name,
// query parameters, body, client or admin key) through the handler: it
// never panics and never answers 5xx over a healthy store; a request it
// refuses (4xx) decides no hit, creates no window and changes no rule;
// and a refusal never echoes the client_id it was sent.
func FuzzServe(f *testing.F) {
	f.Add(uint8(0), "", "", []byte(`{"client_id":"user1234","route":"/api/v1/order","cost":1}`), false)
	f.Add(uint8(0), "", "", []byte(`{"client_id":"user1234","route":"/r","cost":0}`), false)
	f.Add(uint8(0), "", "", []byte("{\"client_id\":\"user1234\xff\",\"route\":\"/r\"}"), false)
	f.Add(uint8(0), "", "cost=5", []byte(`{"client_id":"user1234","route":"/r","extra":1}`), false)
	f.Add(uint8(1), "", "client_id=user1234&route=%2Fr", []byte(nil), true)
	f.Add(uint8(1), "", "client_id=&route=%ZZ&route=/r", []byte(nil), true)
	f.Add(uint8(2), "premium", "", []byte(`{"client_id":"premium-*","route":"*","algorithm":"fixed","limit":5,"window":"60s"}`), true)
	f.Add(uint8(2), "bad name", "", []byte(`{"client_id":"user1234","route":"*","limit":-5,"window":"60s"}`), true)
	f.Add(uint8(3), "default", "", []byte(nil), true)
	f.Add(uint8(4), "", "x=1", []byte(nil), true)
	type route struct{ method, path string }
	routes := []route{
		{http.MethodPost, "/v1/check"}, {http.MethodGet, "/v1/rules/match"}, {http.MethodPut, "/v1/rules/"},
		{http.MethodDelete, "/v1/rules/"}, {http.MethodGet, "/v1/rules"}, {http.MethodGet, "/v1/check"},
		{http.MethodPost, "/v1/rules/"}, {http.MethodGet, "/v1/rules/"},
	}
	db, err := ratedb.Open("", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	s := serverOn(f, db, 10, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.Fuzz(func(t *testing.T, which uint8, name, query string, body []byte, admin bool) {
		rt := routes[int(which)%len(routes)]
		path := rt.path
		if strings.HasSuffix(path, "/") {
			path += name
		}
		req := httptest.NewRequest(rt.method, "/", bytes.NewReader(body))
		req.URL = &url.URL{Path: path, RawQuery: query}
		req.RequestURI = req.URL.RequestURI()
		req.Header.Set("X-API-Key", map[bool]string{false: "c", true: "a"}[admin])
		before, rulesBefore := db.Stats(), s.rules.Current()
		w := httptest.NewRecorder()
		s.h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %q: %d %s", rt.method, req.URL, w.Code, w.Body)
		}
		if w.Code < 400 {
			return
		}
		after := db.Stats()
		if after.Allowed != before.Allowed || after.Denied != before.Denied || after.WindowsInMemory > before.WindowsInMemory {
			t.Fatalf("a refused request (%d %s) changed the counts: %+v, was %+v", w.Code, w.Body, after, before)
		}
		if s.rules.Current() != rulesBefore {
			t.Fatalf("a refused request (%d %s) changed the rules", w.Code, w.Body)
		}
		var sent struct {
			ClientID string `json:"client_id"`
		}
		_ = json.Unmarshal(body, &sent)
		for _, id := range []string{sent.ClientID, req.URL.Query().Get("client_id")} {
			if len(id) >= 8 && strings.Contains(w.Body.String(), id) {
				t.Fatalf("the refusal echoes the client_id %q: %s", id, w.Body)
			}
		}
	})
}
