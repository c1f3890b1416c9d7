package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// memStorage is an in-memory rules.Storage (serialised by a mutex), so the
// race window between Put and the handler's read-back is not hidden behind
// fsyncs.
type memStorage struct {
	mu sync.Mutex
	rs []rules.Stored
}

func (m *memStorage) Load() ([]rules.Stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]rules.Stored(nil), m.rs...), nil
}

func (m *memStorage) Update(f func([]rules.Stored) ([]rules.Stored, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next, err := f(append([]rules.Stored(nil), m.rs...))
	if err != nil {
		return err
	}
	m.rs = next
	return nil
}

// A PUT of a rule that a concurrent DELETE removes before the handler reads
// it back must still answer (2xx), never panic: the handler reads the rule
// from the current set after Put returned, gets nil, and dereferences it.
func TestPutRacingDeleteDoesNotPanic(t *testing.T) {
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "s.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	limit := int64(10)
	def, err := rules.Build(rules.DefaultName, rules.Spec{ClientID: "*", Route: "*", Limit: &limit, Window: "1m"}, true)
	require.NoError(t, err)
	rm, err := rules.NewManager(&memStorage{}, def)
	require.NoError(t, err)
	k, err := keys.Load(keys.Source{Env: "client"}, keys.Source{Env: "admin"})
	require.NoError(t, err)
	h := httpapi.New(httpapi.Options{
		Core: core.New(core.DBStore{DB: db}, core.Options{}), Rules: rm, Keys: k,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	do := func(method, body string) (int, error) {
		req, _ := http.NewRequest(method, srv.URL+"/v1/rules/r", strings.NewReader(body))
		req.Header.Set("X-API-Key", "admin")
		resp, err := srv.Client().Do(req)
		if err != nil {
			return 0, err // net/http recovered a panic and closed the connection
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// PUTs and DELETEs of the same rule race until one PUT fails or the
	// time is up.
	deadline := time.Now().Add(3 * time.Second)
	var failed atomic.Pointer[string]
	var wg sync.WaitGroup
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		wg.Go(func() {
			for time.Now().Before(deadline) && failed.Load() == nil {
				code, err := do(method, `{"client_id":"*","route":"/x","limit":5,"window":"1m"}`)
				if method == http.MethodPut && (err != nil || (code != 200 && code != 201)) {
					msg := http.StatusText(code) + " " + errString(err)
					failed.Store(&msg)
				}
			}
		})
	}
	wg.Wait()
	require.Nil(t, failed.Load(), "a PUT racing a DELETE of the same rule failed (the handler panicked)")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
