package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryKeyHasTTL makes 1,000,000 hits over 20,000 keys, through every
// kind of limiter, while other clients have their connections cut in the
// middle of calls (before Redis got the whole command, and after it ran but
// before the reply), then scans the keyspace: every key must have a TTL.
// The million hits are the exact scripts and arguments Hit sends, pipelined
// so that the test stays within its CI budget; the cut calls go through the
// public API.
func TestEveryKeyHasTTL(t *testing.T) {
	const (
		hits    = 1_000_000
		keys    = 20_000
		workers = 4
		batch   = 1000
	)
	srv := startServer(t)
	client := srv.Client(t, nil)
	prefix := newPrefix()
	s, err := redisstore.New(client, &redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second, DedupWindow: 5 * time.Second})
	require.NoError(t, err)

	type hitArgs func(key string) ([]string, []any)
	var limiters []hitArgs
	var apiCalls []func(ctx context.Context, key string) error
	for _, w := range []struct {
		alg   ratedb.Algorithm
		scale time.Duration
	}{
		{ratedb.FixedWindow, time.Second}, {ratedb.PerKeyWindow, 200 * time.Millisecond},
		{ratedb.StaggeredWindow, time.Minute}, {ratedb.FixedWindow, time.Hour},
	} {
		win, err := s.Window(w.alg, w.scale)
		require.NoError(t, err)
		limiters = append(limiters, func(k string) ([]string, []any) { return win.HitArgs(k, 50, 1) })
		apiCalls = append(apiCalls, func(ctx context.Context, k string) error { _, err := win.Hit(ctx, k, 50, 1); return err })
	}
	for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow} {
		l, err := s.Layered(alg, ratedb.Tier{Scale: 100 * time.Millisecond, Limit: 5}, ratedb.Tier{Scale: time.Minute, Limit: 100})
		require.NoError(t, err)
		limiters = append(limiters, func(k string) ([]string, []any) { return l.HitArgs(k, 1) })
		apiCalls = append(apiCalls, func(ctx context.Context, k string) error { _, err := l.Hit(ctx, k, 1); return err })
	}
	sha, err := redisstore.CountScript.Load(ctx, client).Result()
	require.NoError(t, err)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprint("k", i)
	}

	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Clients whose connections are cut mid-call, both ways.
	var cutCalls, cutErrs [2]int64
	for i, partial := range []bool{false, true} {
		p := newProxy(t, srv.Addr(), "evalsha")
		p.partial = partial
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		cs, err := redisstore.New(c, &redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
		require.NoError(t, err)
		var calls []func(ctx context.Context, key string) error
		for _, w := range []time.Duration{time.Second, time.Minute} {
			win, err := cs.Window(ratedb.FixedWindow, w)
			require.NoError(t, err)
			calls = append(calls, func(ctx context.Context, k string) error { _, err := win.Hit(ctx, k, 50, 1); return err })
		}
		calls = append(calls, apiCalls...) // on the direct client
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				if n%3 == 0 {
					p.Arm(1)
				}
				err := calls[n%2](ctx, names[rng.IntN(keys)])
				cutCalls[i]++
				if err != nil {
					cutErrs[i]++
				}
				if err := apiCalls[n%len(apiCalls)](ctx, names[rng.IntN(keys)]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// The million hits, pipelined.
	var hitWG sync.WaitGroup
	for g := 0; g < workers; g++ {
		hitWG.Add(1)
		go func() {
			defer hitWG.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 42))
			for done := 0; done < hits/workers; done += batch {
				pipe := client.Pipeline()
				for i := 0; i < batch; i++ {
					ks, args := limiters[rng.IntN(len(limiters))](names[rng.IntN(keys)])
					pipe.EvalSha(ctx, sha, ks, args...)
				}
				cmds, err := pipe.Exec(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				for _, c := range cmds {
					if c.Err() != nil {
						t.Error(c.Err())
						return
					}
				}
			}
		}()
	}
	hitWG.Wait()
	close(stop)
	wg.Wait()
	hitTime := time.Since(start)

	// Scan the keyspace: every key has a TTL (PTTL -2 means it expired
	// between SCAN and PTTL).
	var total, counters, noTTL int
	iter := client.Scan(ctx, 0, prefix+"*", 5000).Iterator()
	var scanned []string
	check := func() {
		pipe := client.Pipeline()
		cmds := make([]*redis.DurationCmd, len(scanned))
		for i, k := range scanned {
			cmds[i] = pipe.PTTL(ctx, k)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		for i, c := range cmds {
			if c.Val() == -1 {
				noTTL++
				t.Errorf("key %q has no TTL", scanned[i])
			}
		}
		scanned = scanned[:0]
	}
	for iter.Next(ctx) {
		total++
		scanned = append(scanned, iter.Val())
		if len(scanned) == 5000 {
			check()
		}
	}
	require.NoError(t, iter.Err())
	check()
	n, err := client.DBSize(ctx).Result()
	require.NoError(t, err)
	counters = int(n)
	t.Logf("%d hits in %v; %d calls with cut connections (%d failed, %d failed partial); %d keys scanned (DBSIZE %d) in %v",
		hits, hitTime.Round(time.Millisecond), cutCalls[0]+cutCalls[1], cutErrs[0], cutErrs[1], total, counters, (time.Since(start) - hitTime).Round(time.Millisecond))
	assert.Zero(t, noTTL)
	assert.Greater(t, total, keys, "the scan saw the keys (counters of several limiters)")
	assert.Greater(t, cutErrs[0]+cutErrs[1], int64(10), "connections were cut")
}

// With LocalClock a counter key outlives its window's end by one scale (the
// largest tier's), for a Window (windowScript) and a Layered limiter
// (countScript) alike.
func TestLocalClockTTLSlack(t *testing.T) {
	srv := startServer(t)
	client := srv.Client(t, nil)
	// One minute before an hour ends: the window ends in 1 min.
	now := time.Date(2026, 1, 1, 10, 59, 0, 0, time.UTC)
	s, err := redisstore.New(client, &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second,
		Clock: redisstore.LocalClock(func() time.Time { return now })})
	require.NoError(t, err)
	ctx := context.Background()

	w, err := s.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = w.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	keys, _ := w.HitArgs("k", 10, 1)
	ttl, err := client.PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Hour, "window: end - now (1 min) + one scale (1 h)")

	l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5}, ratedb.Tier{Scale: time.Hour, Limit: 10})
	require.NoError(t, err)
	_, err = l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	keys, _ = l.HitArgs("k", 1)
	ttl, err = client.PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Hour, "layered: latest end - now (1 min) + the largest scale (1 h)")
}
