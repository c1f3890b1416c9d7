package bench

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisLimiters is the smoke test of the Redis benchmark: against a
// real redis-server (skipped when there is none, failed then under
// RATEDB_REQUIRE_REDIS=1), every Redis-backed limiter allows the
// benchmark's hits, and a short run of each measures something.
func TestRedisLimiters(t *testing.T) {
	NeedRedisServer(t)
	srv, err := StartRedis(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	keys := Keys(100)
	for _, f := range RedisFactories {
		lim, err := f.New(c)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for i := 0; i < 3; i++ {
			ok, err := lim.Allow(context.Background(), "k")
			if err != nil || !ok {
				t.Fatalf("%s: hit %d: allowed %v, error %v", f.Name, i, ok, err)
			}
		}
		r, err := RunRedis(context.Background(), lim, f.Name, 4, keys, 50*time.Millisecond, nil)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if r.Allowed == 0 || r.Allowed != r.Hits || r.Errors != 0 || r.P99 < r.P50 {
			t.Errorf("%s: %+v", f.Name, r)
		}
	}
}
