package httpapi_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// fullStorage is a rules store whose file has reached its bound: every
// change fails as FileStorage.Save fails then.
type fullStorage struct{ stored []rules.Stored }

func (f *fullStorage) Load() ([]rules.Stored, error) { return f.stored, nil }

func (f *fullStorage) Update(fn func([]rules.Stored) ([]rules.Stored, error)) error {
	if _, err := fn(f.stored); err != nil {
		return err
	}
	return fmt.Errorf("rules: saving 1 rules (300000000 bytes): %w", rules.ErrRulesFileFull)
}

// A change the rules file has no room for is a 507 naming the bound, and
// the rules served stay as they were.
func TestRulesFileFullIs507(t *testing.T) {
	db, err := ratedb.Open("", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	limit := int64(10)
	def, err := rules.Build(rules.DefaultName, rules.Spec{ClientID: "*", Route: "*", Limit: &limit, Window: time.Minute.String()}, true)
	require.NoError(t, err)
	rm, err := rules.NewManager(&fullStorage{}, def)
	require.NoError(t, err)
	k, err := keys.Load(keys.Source{Env: "c"}, keys.Source{Env: "a"})
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ts := &testServer{h: httpapi.New(httpapi.Options{Core: core.New(core.DBStore{DB: db}, core.Options{}), Rules: rm, Keys: k, Logger: log}), db: db, rules: rm}

	code, body := ts.do(t, http.MethodPut, "/v1/rules/r1", "a", `{"client_id":"*","route":"/x","limit":1,"window":"1m"}`)
	require.Equal(t, http.StatusInsufficientStorage, code, body)
	require.True(t, strings.Contains(body, "256 MiB"), body)
	code, body = ts.do(t, http.MethodGet, "/v1/rules/r1", "a", "")
	require.Equal(t, http.StatusNotFound, code, body)
}
