package envoye2e_test

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCallerGaveUpIsNoStoreFailure: with --redis, a call whose deadline
// passes while its counting script waits in a healthy Redis (held there by
// CLIENT PAUSE WRITE, under a --redis-timeout far longer than the
// deadline) is a caller that gave up, as Envoy does at its rate-limit
// timeout (20 ms by default): the service logs no store failure for it,
// counts no store error (the socket timeout go-redis sets from the
// deadline can fail the call before the context says it ended), and with
// --fail-open does not fail it open. Each call has ended in the
// decision core once /metrics has its duration, and in the service (its
// handler returned) once the process has stopped gracefully. Redis is let go
// before the stop: the periodic read of the rules, a script, waits for it
// too, up to ten times --redis-timeout, and the stop waits for that read.
func TestCallerGaveUpIsNoStoreFailure(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	url := "redis://" + addr + "/0?read_timeout=60s"
	cfg := configDir(t)
	procs := map[string]*proc{
		"fail closed": startProc(t, "", "--envoy-config", cfg, "--redis", url, "--redis-timeout", "60s"),
		"fail open":   startProc(t, "", "--envoy-config", cfg, "--redis", url, "--redis-timeout", "60s", "--fail-open"),
	}
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	require.NoError(t, rc.Do(ctx, "CLIENT", "PAUSE", 120000, "WRITE").Err())
	defer rc.Do(ctx, "CLIENT", "UNPAUSE")

	for name, p := range procs {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req := &rlsv3.RateLimitRequest{Domain: "another", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("key2", "gave-up")}}
		_, err := p.client(t, nil).ShouldRateLimit(cctx, req)
		cancel()
		require.Equal(t, codes.DeadlineExceeded, status.Code(err), "%s: %v", name, err)
	}
	for name, p := range procs {
		eventually(t, name+": the call to end in the core", func() bool {
			return scrape(t, p)["ratedb_check_duration_seconds_count"] == 1
		})
		// Counted before the duration, if at all.
		for series := range scrape(t, p) {
			assert.NotContains(t, series, "ratedb_store_errors_total", "%s: a caller that gave up is not a store error", name)
		}
	}
	require.NoError(t, rc.Do(ctx, "CLIENT", "UNPAUSE").Err())
	for name, p := range procs {
		// A graceful stop waits for the call's handler to return.
		p.stop(t)
		logs := p.logs.String()
		assert.NotContains(t, logs, "store failed", "%s: a caller that gave up is not a store failure:\n%s", name, logs)
	}
}
