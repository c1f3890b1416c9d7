package envoye2e_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// decides then); with --fail-open, OK; either way ratedb_store_errors_total
// counts the failure. Counts are shared by two instances while Redis is up.
func TestStoreDownIsUnavailable(t *testing.T) {
	addr, kill := proctest.StartRedis(t)
	url := "redis://" + addr + "/0"
	cfg := configDir(t)
	closed := startProc(t, "", "--envoy-config", cfg, "--redis", url)
	open := startProc(t, "", "--envoy-config", cfg, "--redis", url, "--fail-open")
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
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(open.logs.String(), "store failed; failing open") {
		require.True(t, time.Now().Before(deadline), "failing open was not logged:\n%s", open.logs)
		time.Sleep(10 * time.Millisecond) // polling another process's log
	}

	// Each failure is a store error of the entry's series, and the help of
	// ratedb_store_errors_total says what an Envoy call then gets: it said
	// "answered 503", the HTTP API's answer, which no gRPC call gets.
	for name, p := range map[string]*proc{"closed": closed, "open": open} {
		assert.Equal(t, 1.0, scrape(t, p)[`ratedb_store_errors_total{api="envoy",rule="another.daily"}`], name)
		_, body := p.get(t, "/metrics")
		var help string
		for _, line := range strings.Split(body, "\n") {
			if h, ok := strings.CutPrefix(line, "# HELP ratedb_store_errors_total "); ok {
				help = h
			}
		}
		assert.Contains(t, help, "UNAVAILABLE", "%s: the help of ratedb_store_errors_total", name)
		assert.Contains(t, help, "503", "%s: the help of ratedb_store_errors_total", name)
	}
}

// TestRedisSetsAcrossInstancesAreAllOrNothing: two instances on one Redis
// take turns at sets of two descriptors, a key of the caller's own
// (pair_a, 50 an hour) and a key every caller shares (pair_b, 30 an hour),
// in rounds of 64 requests on a fresh shared key. An instance decides a set
// under locks of its own process only, so the other instance can fill the
// shared key between this one's look and its hit: the set is then denied,
// and the caller's own key, counted first, must be given back. Afterwards
// every caller's own key holds exactly that caller's allowed requests, and
// each round allowed exactly 30.
func TestRedisSetsAcrossInstancesAreAllOrNothing(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	url := "redis://" + addr + "/0"
	cfg := configDir(t)
	// Exactness, not latency, is under test: a loaded CI machine may take
	// longer than the default 100 ms for a call.
	procs := []*proc{
		startProc(t, "", "--envoy-config", cfg, "--redis", url, "--redis-timeout", "5s"),
		startProc(t, "", "--envoy-config", cfg, "--redis", url, "--redis-timeout", "5s"),
	}
	clearOfBoundary(time.Hour, time.Minute)
	const workers, rounds, perRound = 32, 12, 2
	clients := make([]rlsv3.RateLimitServiceClient, workers)
	for w := range clients {
		clients[w] = procs[w%2].client(t, nil)
	}
	run := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	own := func(w int) string { return run + "-caller-" + strconv.Itoa(w) }
	var allowedOf [workers]atomic.Int64
	for r := range rounds {
		shared := run + "-round-" + strconv.Itoa(r)
		var allowed, failed atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			wg.Go(func() {
				<-start
				for range perRound {
					resp, err := clients[w].ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
						Domain:      "features",
						Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("pair_a", own(w)), desc("pair_b", shared)},
					})
					switch {
					case err != nil:
						failed.Add(1)
					case resp.GetOverallCode() == ok:
						allowed.Add(1)
						allowedOf[w].Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		require.Zero(t, failed.Load(), "round %d", r)
		require.EqualValues(t, 30, allowed.Load(), "round %d: exactly the shared limit across both instances", r)
	}
	for w := range workers {
		// One more request on the caller's own key alone reports what it
		// held before.
		resp := call(t, clients[w], "features", 1, desc("pair_a", own(w)))
		held := 50 - 1 - int64(remaining(resp, 0))
		assert.Equal(t, allowedOf[w].Load(), held, "caller %d: its own key counted a denied set", w)
	}
}
