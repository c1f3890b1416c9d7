package envoye2e_test

import (
	"context"
	"strings"
	"syscall"
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

// TestSlowCallIsCutOffAtShutdownTimeout: a call still running at
// --shutdown-timeout (its counting script held in Redis by CLIENT PAUSE
// WRITE, under a --redis-timeout and a go-redis read timeout far longer)
// is cut off: the forced stop is logged, the caller gets UNAVAILABLE then
// rather than when its Redis call ends (after a minute), and the exit
// status is 1. (TestForcedGRPCStopIsLoggedAndImmediate covers a connection
// held in its handshake instead.)
func TestSlowCallIsCutOffAtShutdownTimeout(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	p := startProc(t, "", "--envoy-config", configDir(t),
		// go-redis's own read timeout (3 s by default) would end the
		// script's call, and with it the graceful stop, well before the
		// waits below.
		"--redis", "redis://"+addr+"/0?read_timeout=60s", "--redis-timeout", "60s", "--shutdown-timeout", "300ms")
	c := p.client(t, nil)
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	// Scripts wait, reads (the rules' rereading, CLIENT LIST) do not.
	require.NoError(t, rc.Do(ctx, "CLIENT", "PAUSE", 120000, "WRITE").Err())
	defer rc.Do(ctx, "CLIENT", "UNPAUSE")

	callErr := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		req := &rlsv3.RateLimitRequest{Domain: "another", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("key2", "slow")}}
		_, err := c.ShouldRateLimit(cctx, req)
		callErr <- err
	}()
	// The call is in flight once its script waits in Redis (a blocked
	// client: flags=b).
	eventually(t, "the call's script held by the pause", func() bool {
		list, err := rc.ClientList(ctx).Result()
		require.NoError(t, err)
		for _, line := range strings.Split(list, "\n") {
			if strings.Contains(line, " flags=b ") && strings.Contains(line, " cmd=eval") {
				return true
			}
		}
		return false
	})

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-callErr:
		assert.Equal(t, codes.Unavailable, status.Code(err), "the call cut off: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the call still waits 30 s after SIGTERM with a 300 ms --shutdown-timeout\n%s", p.logs)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("ratedb did not exit after SIGTERM\n%s", p.logs)
	}
	logs := p.logs.String()
	assert.Equal(t, 1, p.cmd.ProcessState.ExitCode(), logs)
	assert.Contains(t, logs, `"level":"WARN","msg":"shutdown: gRPC calls or connections still open after --shutdown-timeout; cutting them off"`)
	assert.Contains(t, logs, "ratedb serve: shutdown: gRPC calls or connections still open after --shutdown-timeout 300ms were cut off")
	assert.NotContains(t, logs, "HTTP requests still in flight", "no HTTP request was in flight")
}
