package core_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two cores on one DB (two instances on one store) and many goroutines run
// overlapping sets in every order, the same key twice, peeks, shadow and
// quota checks, and single checks: each decision is all-or-nothing, and the
// counts equal what the decisions report counted, never above a limit.
func TestStressSetsExact(t *testing.T) {
	c1, db, now := newCore(t, core.Options{})
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	c2 := core.New(core.DBStore{DB: db}, core.Options{Clock: clock})
	cores := []*core.Core{c1, c2}
	keys := []string{"x", "y", "z"}
	lim := map[string]int64{"x": 150, "y": 200, "z": 120}
	limits := map[string]*core.Limit{}
	for _, k := range keys {
		limits[k] = window(k, lim[k], time.Minute)
	}
	sh := window("sh", 1_000_000, time.Minute)
	sh.Shadow = true
	var counted [3]atomic.Int64
	idx := map[string]int{"x": 0, "y": 1, "z": 2}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			c := cores[g%2]
			for range 400 {
				n := 1 + rng.IntN(4)
				checks := make([]core.Check, n)
				for i := range checks {
					k := keys[rng.IntN(3)]
					l := limits[k]
					if rng.IntN(6) == 0 {
						l = sh
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
						t.Errorf("denied set counted check %d: %+v", i, checks)
					}
					if d.Allowed && ch.Cost > 0 && !r.Counted && ch.Limit != sh {
						t.Errorf("allowed set did not count enforced check %d: %+v", i, checks)
					}
					if r.Counted {
						counted[idx[ch.Key]].Add(ch.Cost)
					}
				}
			}
		})
	}
	wg.Wait()
	got := minuteCounts(t, db, keys...)
	for _, k := range keys {
		assert.Equal(t, counted[idx[k]].Load(), got[k], "key %s", k)
		assert.LessOrEqual(t, got[k], int64(1_000_000))
	}
	_ = ratedb.FixedWindow
	require.True(t, true)
}
