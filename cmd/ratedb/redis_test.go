package main_test

import (
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedisSharedCountsAndRules(t *testing.T) {
	t.Parallel()
	addr, _ := proctest.StartRedis(t)
	url := "redis://" + addr + "/0"
	args := []string{"--redis", url, "--default-limit", "40", "--default-algorithm", "per_key", "--default-window", "1h",
		// Exactness, not latency, is under test: a loaded CI machine may
		// take longer than the default 100 ms for a call.
		"--redis-timeout", "5s"}
	// Two instances on one Redis share every count.
	a := start(t, filepath.Join(t.TempDir(), "unused.db"), args...)
	b := start(t, filepath.Join(t.TempDir(), "unused.db"), args...)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range 10 {
				if s.check("shared", "/r").Status == "Allow" {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(40), allowed.Load(), "exactly the limit across both instances")

	// A rule stored through one instance reaches the other (it rereads
	// the rules every 2 s) and survives a restart.
	code, _, body := a.do("PUT", "/v1/rules/vip", adminKey, `{"client_id":"vip","route":"*","algorithm":"per_key","limit":3,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	assert.Equal(t, int64(3), a.check("vip", "/r").Limit)
	deadline := time.Now().Add(10 * time.Second)
	for b.check("vip", "/x").Limit != 3 {
		require.True(t, time.Now().Before(deadline), "the other instance never saw the rule")
		time.Sleep(50 * time.Millisecond) // polling another process's periodic reload
	}
	require.Equal(t, 0, a.stop(syscall.SIGTERM))
	a = start(t, filepath.Join(t.TempDir(), "unused.db"), args...)
	d := a.check("vip", "/r")
	assert.Equal(t, int64(3), d.Limit, "the rule survives the restart")
	assert.Equal(t, int64(1), d.Remain, "and so does the count")
	code, _, _ = a.do("GET", "/readyz", "", "")
	assert.Equal(t, http.StatusOK, code)
}

func TestRedisDown(t *testing.T) {
	t.Parallel()
	addr, kill := proctest.StartRedis(t)
	url := "redis://" + addr + "/0"
	closed := start(t, filepath.Join(t.TempDir(), "unused.db"), "--redis", url)
	open := start(t, filepath.Join(t.TempDir(), "unused.db"), "--redis", url, "--fail-open")
	assert.Equal(t, "Allow", closed.check("c", "/r").Status)
	kill()

	code, _, body := closed.do("POST", "/v1/check", clientKey, `{"client_id":"c","route":"/r"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	assert.Contains(t, body, `"status":"error"`)
	assert.Contains(t, body, "unavailable")
	code, _, _ = closed.do("GET", "/readyz", "", "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	code, _, _ = closed.do("GET", "/healthz", "", "")
	assert.Equal(t, http.StatusOK, code)
	code, _, body = closed.do("PUT", "/v1/rules/r", adminKey, `{"client_id":"*","route":"/r","limit":5,"window":"1m"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code, "a rule change while Redis is down: %s", body)
	code, _, body = closed.do("DELETE", "/v1/rules/r", adminKey, "")
	assert.Equal(t, http.StatusServiceUnavailable, code, "a rule change while Redis is down: %s", body)

	code, h, body := open.do("POST", "/v1/check", clientKey, `{"client_id":"c","route":"/r"}`)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"status":"Allow"`)
	assert.Contains(t, body, `"fail_open":true`)
	assert.Equal(t, "true", h.Get("X-Ratedb-Fail-Open"))
	_, _, metrics := open.do("GET", "/metrics", "", "")
	assert.Contains(t, metrics, `ratedb_store_errors_total{rule="default"} 1`)
}

func TestRedisBadURL(t *testing.T) {
	t.Parallel()
	_, stderr, code := runTool(t, "serve", "--redis", "http://user:secretpw@x", "--http", "127.0.0.1:0")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--redis")
	assert.NotContains(t, stderr, "secretpw", "the URL may hold a password")
	_, stderr, code = runTool(t, "serve", "--fail-open", "--db", filepath.Join(t.TempDir(), "x.db"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--fail-open applies only with --redis")
}
