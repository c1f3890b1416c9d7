package redisstore_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCluster covers what only a Redis Cluster shows: every key of one user
// key (a Layered limiter's counter, a Window's, a call's dedup key) lands in
// one slot, different user keys spread over the slots (the hash tag is the
// user key, not the prefix), and a slot moved to another node while it is
// being hit (MOVED, ASK and TRYAGAIN redirections) loses and doubles no
// count.
func TestCluster(t *testing.T) {
	c := startCluster(t)
	t.Run("OneSlotPerKey", func(t *testing.T) { testOneSlotPerKey(t, c) })
	for _, dedup := range []time.Duration{0, 10 * time.Second} {
		t.Run(fmt.Sprint("Resharding/DedupWindow=", dedup), func(t *testing.T) { testResharding(t, c, dedup) })
	}
	t.Run("NodePaused", func(t *testing.T) { testNodePaused(t, c) })
	t.Run("NewClientWhileANodeIsPaused", func(t *testing.T) { testNewClientWhileANodeIsPaused(t, c) })
}

// testNewClientWhileANodeIsPaused: a ClusterClient made while a node does
// not answer (a service starting then) first looks up the cluster's command
// table under a context of its own, for up to 5 seconds in go-redis v9, even
// with ContextTimeoutEnabled. Calls on keys of the healthy nodes must still
// return within Timeout: the Store watches every cluster call itself.
func testNewClientWhileANodeIsPaused(t *testing.T, c *cluster) {
	const timeout = 100 * time.Millisecond
	admin := c.Client(t, nil)
	probe, err := redisstore.New(admin, &redisstore.Options{Prefix: newPrefix()})
	require.NoError(t, err)
	pw, err := probe.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	paused := c.nodes[0]
	var healthy []string
	for i := 0; len(healthy) < 5; i++ {
		k := fmt.Sprint("key-", i)
		names, _ := pw.HitArgs(k, 1, 1)
		slot, err := admin.ClusterKeySlot(ctx, names[0]).Result()
		require.NoError(t, err)
		if c.owner(t, slot) != paused {
			healthy = append(healthy, k)
		}
	}
	paused.Pause()
	defer paused.Resume()
	worst := time.Duration(0)
	for range 8 {
		cl := c.Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: true})
		s, err := redisstore.New(cl, &redisstore.Options{Prefix: newPrefix(), Timeout: timeout})
		require.NoError(t, err)
		w, err := s.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		for _, k := range healthy {
			start := time.Now()
			_, _ = w.Hit(ctx, k, 100, 1) // an error (ErrUnavailable) is allowed; a long wait is not
			worst = max(worst, time.Since(start))
		}
	}
	// Before the fix calls took 5 s; the margin is for a loaded CI machine.
	assert.Less(t, worst, 2*time.Second, "a call on a healthy node's key blocked far past Timeout")
}

// testNodePaused pauses (SIGSTOP) the node that owns a key: calls on that
// key return ErrUnavailable within Timeout plus a margin, with and without
// ContextTimeoutEnabled, calls on keys of other nodes still work, and the
// key works again once the node resumes.
func testNodePaused(t *testing.T, c *cluster) {
	const timeout, margin = 100 * time.Millisecond, 150 * time.Millisecond
	for _, cte := range []bool{false, true} {
		t.Run(fmt.Sprint("ContextTimeoutEnabled=", cte), func(t *testing.T) {
			s, err := redisstore.New(c.Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: cte}), &redisstore.Options{Prefix: newPrefix(), Timeout: timeout})
			require.NoError(t, err)
			w, err := s.Window(ratedb.FixedWindow, time.Minute)
			require.NoError(t, err)
			admin := c.Client(t, nil)
			// A key on each node.
			byNode := map[*server]string{}
			for i := 0; len(byNode) < len(c.nodes); i++ {
				k := fmt.Sprint("key-", i)
				names, _ := w.HitArgs(k, 1, 1)
				slot, err := admin.ClusterKeySlot(ctx, names[0]).Result()
				require.NoError(t, err)
				if n := c.owner(t, slot); byNode[n] == "" {
					byNode[n] = k
				}
			}
			for _, k := range byNode {
				_, err := w.Hit(ctx, k, 100, 1)
				require.NoError(t, err)
			}
			paused := c.nodes[0]
			paused.Pause()
			for i := 0; i < 3; i++ {
				start := time.Now()
				_, err := w.Hit(ctx, byNode[paused], 100, 1)
				took := time.Since(start)
				assert.ErrorIs(t, err, ratedb.ErrUnavailable)
				assert.Less(t, took, timeout+margin)
			}
			for n, k := range byNode {
				if n != paused {
					_, err := w.Hit(ctx, k, 100, 1)
					assert.NoError(t, err, "a key of another node")
				}
			}
			paused.Resume()
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := w.Hit(ctx, byNode[paused], 100, 1); err == nil {
					break
				}
				require.True(t, time.Now().Before(deadline), "the node never answered again")
				time.Sleep(10 * time.Millisecond) // polling an external process coming back
			}
		})
	}
}

func testOneSlotPerKey(t *testing.T, c *cluster) {
	cl := c.Client(t, nil)
	s, err := redisstore.New(cl, &redisstore.Options{Prefix: "app:", Timeout: 5 * time.Second, DedupWindow: 5 * time.Second})
	require.NoError(t, err)
	l, err := s.Layered(ratedb.StaggeredWindow, ratedb.Tier{Scale: time.Second, Limit: 1}, ratedb.Tier{Scale: time.Hour, Limit: 9})
	require.NoError(t, err)
	w, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	slots := map[int64]bool{}
	for i := 0; i < 200; i++ {
		key := fmt.Sprint("user-", i)
		if i%10 == 0 {
			key = fmt.Sprintf("}{weird}%d{", i) // braces in the user key
		}
		lk, _ := l.HitArgs(key, 1)
		wk, _ := w.HitArgs(key, 1, 1)
		names := append(lk, wk...)
		require.Len(t, names, 4, "counter and dedup keys of both")
		first, err := cl.ClusterKeySlot(ctx, names[0]).Result()
		require.NoError(t, err)
		for _, n := range names[1:] {
			slot, err := cl.ClusterKeySlot(ctx, n).Result()
			require.NoError(t, err)
			assert.Equal(t, first, slot, "key %d: %q and %q", i, names[0], n)
		}
		slots[first] = true
		r, err := l.Hit(ctx, key, 1) // a multi-key script on the real cluster
		require.NoError(t, err)
		assert.True(t, r.Allowed)
	}
	assert.Greater(t, len(slots), 150, "user keys spread over the slots")
}

// testResharding moves the slot of a hot key from its node to another with
// CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE and SETSLOT NODE, while 16
// goroutines of 4 Stores hit it; then every allowed hit is in the count,
// once. With DedupWindow, each counting call also creates a key (its
// request id), which a migrating slot answers with TRYAGAIN until the
// migration ends; go-redis retries those.
func testResharding(t *testing.T, c *cluster, dedup time.Duration) {
	const key = "hot"
	prefix := newPrefix()
	var ws []*redisstore.Window
	var ls []*redisstore.Layered
	for i := 0; i < 4; i++ {
		// The caller owns the client: TRYAGAIN is retried up to
		// MaxRedirects times.
		s, err := redisstore.New(c.Client(t, &redis.ClusterOptions{MaxRedirects: 20}), &redisstore.Options{Prefix: prefix, Timeout: 10 * time.Second, DedupWindow: dedup})
		require.NoError(t, err)
		// Windows anchored at the first hit: the Redis server's clock
		// crossing an hour boundary mid-test starts no new window.
		w, err := s.Window(ratedb.PerKeyWindow, time.Hour)
		require.NoError(t, err)
		l, err := s.Layered(ratedb.PerKeyWindow, ratedb.Tier{Scale: time.Hour, Limit: 1 << 40}, ratedb.Tier{Scale: 24 * time.Hour, Limit: 1 << 40})
		require.NoError(t, err)
		ws, ls = append(ws, w), append(ls, l)
	}
	names, _ := ws[0].HitArgs(key, 1, 1)
	admin := c.Client(t, nil)
	slot, err := admin.ClusterKeySlot(ctx, names[0]).Result()
	require.NoError(t, err)
	src, dst := c.owner(t, slot), (*server)(nil)
	for _, n := range c.nodes {
		if n != src {
			dst = n
			break
		}
	}

	var allowed, layered, errs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%2 == 0 {
					r, err := ws[g%4].Hit(ctx, key, 1<<40, 1)
					if err != nil {
						errs.Add(1)
						t.Error(err)
						return
					}
					if r.Allowed {
						allowed.Add(1)
					}
				} else {
					r, err := ls[g%4].Hit(ctx, key, 1)
					if err != nil {
						errs.Add(1)
						t.Error(err)
						return
					}
					if r.Allowed {
						layered.Add(1)
					}
				}
			}
		}()
	}
	progress := func() { // let at least 200 more hits through
		target := allowed.Load() + layered.Load() + 200
		deadline := time.Now().Add(30 * time.Second)
		for allowed.Load()+layered.Load() < target && errs.Load() == 0 {
			require.True(t, time.Now().Before(deadline), "no progress")
			time.Sleep(time.Millisecond) // polling the hitters' progress
		}
	}
	progress()
	srcID, dstID := src.id(t), dst.id(t)
	sc, dc := src.Client(t, nil), dst.Client(t, nil)
	require.NoError(t, dc.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	require.NoError(t, sc.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	for {
		keys, err := sc.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		require.NoError(t, err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		require.NoError(t, sc.Do(ctx, args...).Err())
	}
	for _, n := range []*server{dst, src} {
		require.NoError(t, n.Client(t, nil).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	}
	for _, n := range c.nodes {
		if n != src && n != dst {
			require.NoError(t, n.Client(t, nil).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
		}
	}
	moved := allowed.Load() + layered.Load()
	progress()
	close(stop)
	wg.Wait()
	require.Zero(t, errs.Load())
	assert.Greater(t, allowed.Load()+layered.Load(), moved, "hits went on after the move (MOVED to the new owner)")

	n, err := ws[0].Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, allowed.Load(), n, "every allowed Window hit counted once")
	counts, err := ls[0].Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, []int64{layered.Load(), layered.Load()}, counts, "every allowed Layered hit counted once, in both tiers")
	exists, err := dst.Client(t, nil).Exists(ctx, names[0]).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), exists, "the counter now lives on the new owner")
}

// owner returns the node serving slot.
func (c *cluster) owner(t *testing.T, slot int64) *server {
	t.Helper()
	shards, err := c.nodes[0].Client(t, nil).ClusterSlots(ctx).Result()
	require.NoError(t, err)
	for _, sh := range shards {
		if int64(sh.Start) <= slot && slot <= int64(sh.End) {
			for _, n := range c.nodes {
				if strings.HasSuffix(sh.Nodes[0].Addr, fmt.Sprint(":", n.port)) {
					return n
				}
			}
		}
	}
	t.Fatalf("no owner of slot %d", slot)
	return nil
}

// id returns the node's cluster id.
func (s *server) id(t *testing.T) string {
	id, err := s.Client(t, nil).Do(ctx, "CLUSTER", "MYID").Text()
	require.NoError(t, err)
	return id
}
