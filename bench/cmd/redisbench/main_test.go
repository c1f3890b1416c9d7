package main

import (
	"context"
	"testing"
	"time"

	"github.com/ratedb/ratedb/bench"
	"github.com/redis/go-redis/v9"
)

// TestRowServerStatsCoverTimedHitsOnly checks that a row's Redis figures
// come from the timed hits alone: after measureRow, INFO commandstats holds
// exactly one EVALSHA per timed hit of the bare EVALSHA limiter, none of the
// untimed pass over the 1,000 keys before them (which creates every key, a
// dearer call than the timed ones, and was half of a 100,000-key row's
// calls).
func TestRowServerStatsCoverTimedHitsOnly(t *testing.T) {
	bench.NeedRedisServer(t)
	srv, err := bench.StartRedis(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	var f bench.RedisFactory
	for _, x := range bench.RedisFactories {
		if x.Name == "bare EVALSHA" {
			f = x
		}
	}
	if f.New == nil {
		t.Fatal("no bare EVALSHA in bench.RedisFactories")
	}
	lim, err := f.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := bench.Keys(1000)
	r, err := measureRow(ctx, c, lim, f.Name, 4, keys, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Hits == 0 || r.Errors != 0 || r.Allowed != r.Hits {
		t.Fatalf("row: %+v", r)
	}
	calls, _, err := scriptStats(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if calls != float64(r.Hits) {
		t.Fatalf("INFO commandstats counts %.0f script calls for %d timed hits (and %d untimed before them): the row's Redis figures do not cover the timed hits alone", calls, r.Hits, len(keys))
	}
	if r.ServerPerCall <= 0 {
		t.Fatalf("ServerPerCall %v µs, want > 0", r.ServerPerCall)
	}
}
