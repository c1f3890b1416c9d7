package main_test

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHTTPCallerGaveUpIsNoStoreFailure: with --redis, a check whose client
// hangs up while its counting script waits in a healthy Redis (held there
// by CLIENT PAUSE WRITE, under a --redis-timeout longer than the client's
// patience) is a caller that gave up, not a store failure: the
// service logs no store failure for it, counts no store error and, with
// --fail-open, does not fail it open ("check failed open: the store
// failed" sent operators after a Redis that never failed). The grpc side's
// twin is TestCallerGaveUpIsNoStoreFailure in internal/envoye2e.
func TestHTTPCallerGaveUpIsNoStoreFailure(t *testing.T) {
	t.Parallel()
	addr, _ := proctest.StartRedis(t)
	url := "redis://" + addr + "/0?read_timeout=60s"
	svcs := map[string]*service{
		"fail closed": start(t, "", "--redis", url, "--redis-timeout", "2s"),
		"fail open":   start(t, "", "--redis", url, "--redis-timeout", "2s", "--fail-open"),
	}
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	require.NoError(t, rc.Do(ctx, "CLIENT", "PAUSE", 120000, "WRITE").Err())
	defer rc.Do(ctx, "CLIENT", "UNPAUSE")

	for name, s := range svcs {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		req, err := http.NewRequestWithContext(cctx, http.MethodPost, s.url+"/v1/check", strings.NewReader(`{"client_id":"c","route":"/gave-up"}`))
		require.NoError(t, err)
		req.Header.Set("X-API-Key", clientKey)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s: the check was answered while Redis was paused", name)
	}
	for name, s := range svcs {
		// The decision core has ended once it has observed the check's
		// duration (after any store error); then the handler returns.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, _, metrics := s.do("GET", "/metrics", "", "")
			if strings.Contains(metrics, "ratedb_check_duration_seconds_count 1") {
				assert.NotContains(t, metrics, `ratedb_store_errors_total{api="http"`, "%s: a caller that gave up is not a store error", name)
				break
			}
			require.True(t, time.Now().Before(deadline), "%s: the check never ended:\n%s", name, s.stderr)
			time.Sleep(10 * time.Millisecond) // polling another process's metrics
		}
	}
	// Redis answers again (the periodic reload of the rules waits for it
	// too), and a graceful stop waits for the check's handler to return.
	require.NoError(t, rc.Do(ctx, "CLIENT", "UNPAUSE").Err())
	for name, s := range svcs {
		require.Equal(t, 0, s.stop(syscall.SIGTERM), "%s:\n%s", name, s.stderr)
		logs := s.stderr.String()
		assert.NotContains(t, logs, "store failed", "%s: a caller that gave up is not a store failure:\n%s", name, logs)
		assert.NotContains(t, logs, "failed open", "%s: a caller that gave up is not failed open:\n%s", name, logs)
	}
}
