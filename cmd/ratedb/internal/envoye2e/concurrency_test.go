package envoye2e_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConcurrentExactness: 32 concurrent callers over 4 connections send 400
// requests, each with two descriptors (limits 50 and 30 per hour). Exactly
// 30 are allowed, and the first descriptor counted exactly those 30: a
// denied request counted nothing, even under concurrency.
func TestConcurrentExactness(t *testing.T) {
	clearOfBoundary(time.Hour, 30*time.Second)
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", configDir(t))
	clients := make([]rlsv3.RateLimitServiceClient, 4)
	for i := range clients {
		clients[i] = p.client(t, nil)
	}
	const workers, perWorker = 32, 12
	var allowed, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%len(clients)]
			for range perWorker {
				resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
					Domain:      "features",
					Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("pair_a", "x"), desc("pair_b", "x")},
				})
				switch {
				case err != nil:
					failed.Add(1)
				case resp.GetOverallCode() == rlsv3.RateLimitResponse_OK:
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, failed.Load())
	assert.EqualValues(t, 30, allowed.Load(), "exactly the smaller limit")

	c := clients[0]
	resp := call(t, c, "features", 1, desc("pair_a", "x"))
	assert.EqualValues(t, 50-30-1, remaining(resp, 0), "pair_a counted only the allowed requests")
}
