package httpapi_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// While the store is down (here closed) every check answers 503: the log
// gets about one line a second, not one a check, which clients could use to
// fill it.
func TestStoreFailuresLogOnceASecond(t *testing.T) {
	db, err := ratedb.Open("", nil)
	require.NoError(t, err)
	limit := int64(10)
	def, err := rules.Build(rules.DefaultName, rules.Spec{ClientID: "*", Route: "*", Limit: &limit, Window: time.Hour.String()}, true)
	require.NoError(t, err)
	rm, err := rules.NewManager(rules.FileStorage{Path: filepath.Join(t.TempDir(), "r.json")}, def)
	require.NoError(t, err)
	k, err := keys.Load(keys.Source{Env: "c"}, keys.Source{Env: "a"})
	require.NoError(t, err)
	var buf bytes.Buffer
	s := &testServer{h: httpapi.New(httpapi.Options{Core: core.New(core.DBStore{DB: db}, core.Options{}), Rules: rm, Keys: k,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))}), db: db, rules: rm}
	require.NoError(t, db.Close())
	start := time.Now()
	for range 50 {
		code, _ := s.do(t, http.MethodPost, "/v1/check", "c", `{"client_id":"u","route":"/r"}`)
		require.Equal(t, http.StatusServiceUnavailable, code)
	}
	lines := strings.Count(buf.String(), "store failed")
	// One line a second of the loop (it takes milliseconds).
	assert.LessOrEqual(t, lines, 1+int(time.Since(start)/time.Second), "log lines for 50 failed checks")
	assert.GreaterOrEqual(t, lines, 1)
}
