package envoye2e_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// startRedis runs a throwaway redis-server on a loopback port; it returns
// its address and a kill function (also run by t.Cleanup). Without
// redis-server on PATH the test is skipped, or fails when
// RATEDB_REQUIRE_REDIS=1 (as scripts/test.sh sets).
func startRedis(t *testing.T) (string, func()) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("RATEDB_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not on PATH and RATEDB_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	kill := func() { once.Do(func() { _ = cmd.Process.Kill(); <-exited }) }
	t.Cleanup(kill)
	eventually(t, "redis-server to accept connections", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	return addr, kill
}

// TestStoreDownIsUnavailable: with --redis, a Redis that goes away makes
// ShouldRateLimit answer UNAVAILABLE promptly (Envoy's failure_mode_deny
// decides then); with --fail-open, OK. Counts are shared by two instances
// while Redis is up.
func TestStoreDownIsUnavailable(t *testing.T) {
	addr, kill := startRedis(t)
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
