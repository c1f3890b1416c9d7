package envoye2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStoreDownIsUnavailable: with --redis, a Redis that goes away makes
// ShouldRateLimit answer UNAVAILABLE promptly (Envoy's failure_mode_deny
// decides then); with --fail-open, OK. Counts are shared by two instances
// while Redis is up.
func TestStoreDownIsUnavailable(t *testing.T) {
	addr, kill := proctest.StartRedis(t)
	url := "redis://" + addr + "/0"
	cfg := configDir(t)
	closed := startProc(t, filepath.Join(t.TempDir(), "unused.db"), "--envoy-config", cfg, "--redis", url)
	open := startProc(t, filepath.Join(t.TempDir(), "unused.db"), "--envoy-config", cfg, "--redis", url, "--fail-open")
	cClosed, cOpen := closed.client(t, nil), open.client(t, nil)

	clearOfBoundary(24*time.Hour, time.Minute)
	assert.EqualValues(t, 4, remaining(call(t, cClosed, "another", 1, desc("daily", strconv.Itoa(os.Getpid()))), 0))
	assert.EqualValues(t, 3, remaining(call(t, cOpen, "another", 1, desc("daily", strconv.Itoa(os.Getpid()))), 0), "one shared count")

	kill()
	req := &rlsv3.RateLimitRequest{Domain: "another", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("daily", "down")}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := cClosed.ShouldRateLimit(ctx, req)
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	assert.Less(t, time.Since(start), 3*time.Second, "promptly")

	resp, err := cOpen.ShouldRateLimit(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode(), "--fail-open allows")
}
