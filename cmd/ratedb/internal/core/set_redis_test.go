package core_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/ratedb/ratedb/redisstore"
)

// Instances on one Redis run overlapping sets (keys in every order, a key
// twice, quota checks, layered limits) against each other: every decision
// is all-or-nothing and the counts are exactly what the decisions counted.
func TestRedisInstancesExact(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	var cores []*core.Core
	var stores []*redisstore.Store
	for range 3 {
		cl := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = cl.Close() })
		s, err := redisstore.New(cl, &redisstore.Options{Timeout: 5 * time.Second})
		require.NoError(t, err)
		stores = append(stores, s)
		cores = append(cores, core.New(redisstate.Store{S: s}, core.Options{}))
	}
	keys := []string{"x", "y", "z"}
	win := map[string]*core.Limit{}
	q := map[string]*core.Limit{}
	lay := map[string]*core.Limit{}
	for i, k := range keys {
		win[k] = window("w"+k, int64(60+30*i), time.Hour)
		q[k] = window("q"+k, int64(40+20*i), time.Hour)
		q[k].Quota = true
		lay[k] = &core.Limit{Name: "l" + k, Algorithm: ratedb.FixedWindow, Layered: true,
			Tiers: []ratedb.Tier{{Scale: time.Hour, Limit: int64(50 + 10*i)}, {Scale: 2 * time.Hour, Limit: 1000}}}
	}
	idx := map[string]int{"x": 0, "y": 1, "z": 2}
	var wcount, lcount [3]atomic.Int64
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 11))
			c := cores[g%3]
			for range 250 {
				n := 1 + rng.IntN(4)
				checks := make([]core.Check, n)
				for i := range checks {
					k := keys[rng.IntN(3)]
					var l *core.Limit
					switch rng.IntN(3) {
					case 0:
						l = win[k]
					case 1:
						l = q[k]
					default:
						l = lay[k]
					}
					checks[i] = core.Check{Limit: l, Key: k, Cost: int64(rng.IntN(3))}
				}
				d, err := c.Decide(ctx, checks...)
				if !assert.NoError(t, err) {
					return
				}
				for i, r := range d.Results {
					ch := checks[i]
					if !d.Allowed && r.Counted {
						t.Errorf("denied set counted check %d", i)
					}
					if d.Allowed && ch.Cost > 0 && !ch.Limit.Quota && !r.Counted {
						t.Errorf("allowed set left enforced check %d uncounted", i)
					}
					if r.Counted {
						if ch.Limit.Layered {
							lcount[idx[ch.Key]].Add(ch.Cost)
						} else {
							wcount[idx[ch.Key]].Add(ch.Cost)
						}
					}
				}
			}
		})
	}
	wg.Wait()
	w, err := stores[0].Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	l, err := stores[0].Layered(ratedb.FixedWindow, lay["x"].Tiers...)
	require.NoError(t, err)
	for _, k := range keys {
		n, err := w.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, wcount[idx[k]].Load(), n, "window key %s", k)
		ln, err := l.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, lcount[idx[k]].Load(), ln[0], "layered key %s", k)
		t.Logf("%s: window %d layered %v", k, n, ln)
	}
}
