package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// BenchmarkServer_Check measures the handler of POST /v1/check alone (no
// network), on 10,000 client ids x 20 routes, with an embedded file: with
// fewer than 200,000 iterations every check is a key's first (a window
// opened, and a look-up in the file).
func BenchmarkServer_Check(b *testing.B) {
	db, err := ratedb.Open(filepath.Join(b.TempDir(), "b.db"), &ratedb.Options{MaxHotKeys: 1 << 18})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	limit := int64(1 << 40)
	def, err := rules.Build(rules.DefaultName, rules.Spec{ClientID: "*", Route: "*", Limit: &limit, Window: time.Hour.String()}, true)
	if err != nil {
		b.Fatal(err)
	}
	rm, err := rules.NewManager(rules.FileStorage{Path: filepath.Join(b.TempDir(), "r.json")}, def)
	if err != nil {
		b.Fatal(err)
	}
	k, err := keys.Load(keys.Source{Env: "k"}, keys.Source{})
	if err != nil {
		b.Fatal(err)
	}
	h := httpapi.New(httpapi.Options{Core: core.New(core.DBStore{DB: db}, core.Options{}), Rules: rm, Keys: k,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	bodies := make([][]byte, 0, 10_000*20)
	for c := range 10_000 {
		for r := range 20 {
			bodies = append(bodies, fmt.Appendf(nil, `{"client_id":"client-%05d","route":"/api/v1/resource-%02d"}`, c, r))
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req := httptest.NewRequest(http.MethodPost, "/v1/check", bytes.NewReader(bodies[(i*7919)%len(bodies)]))
		req.Header.Set("X-API-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}
