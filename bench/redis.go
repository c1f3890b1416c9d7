package bench

// The Redis benchmark: ratedb/redisstore against the Redis-backed Go
// limiters people use, and against the floor (a bare EVALSHA of a trivial
// script: one round trip), side by side in one run against one local
// redis-server. See cmd/redisbench.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

// RedisLimiter is the common face of the Redis-backed limiters under test:
// one hit against key, allowed or not. Safe for concurrent use.
type RedisLimiter interface {
	Allow(ctx context.Context, key string) (bool, error)
}

// RedisFactory builds one kind of Redis-backed limiter on a client, with
// the quota AllowAll per DefaultWindow (every timed hit is allowed).
type RedisFactory struct {
	Name string
	Desc string
	// Client says which client it runs on: "" the shared one (built with
	// ContextTimeoutEnabled), "plain" one without it (go-redis's default).
	Client string
	New    func(c redis.UniversalClient) (RedisLimiter, error)
}

// RedisFactories lists the Redis-backed limiters under test, ratedb first.
var RedisFactories = []RedisFactory{
	{Name: "ratedb/redisstore", Desc: "redisstore Window, FixedWindow, the default options (ServerClock, counting calls not retried) but Timeout 1 s, so that a call queued behind 63 others on a loaded machine is measured rather than cut off (ErrUnavailable) at the default 50 ms", New: newRedisstore},
	{Name: "ratedb/redisstore, plain client", Desc: "the same on a client without ContextTimeoutEnabled: each call runs in a watchdog goroutine", Client: "plain", New: newRedisstore},
	{Name: "ratedb/redisstore, DedupWindow 1 s", Desc: "the same with request ids (Options.DedupWindow 1 s), so that go-redis may retry counting calls: what exactly-once answers after a lost reply cost", New: newRedisstoreDedup},
	{Name: "redis_rate v10", Desc: "github.com/go-redis/redis_rate/v10 Allow (GCRA script)", New: newRedisRate},
	{Name: "ulule redis", Desc: "github.com/ulule/limiter/v3 drivers/store/redis Get (INCRBY script; counts denied hits too)", New: newUluleRedis},
	{Name: "bare EVALSHA", Desc: "EVALSHA of `return 1` with one key: the round-trip floor, not a limiter", New: newBareEvalsha},
}

type redisstoreLimiter struct{ w *redisstore.Window }

func newRedisstore(c redis.UniversalClient) (RedisLimiter, error) {
	s, err := redisstore.New(c, &redisstore.Options{Prefix: "bench:", Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	w, err := s.Window(ratedb.FixedWindow, DefaultWindow)
	return redisstoreLimiter{w}, err
}

func newRedisstoreDedup(c redis.UniversalClient) (RedisLimiter, error) {
	s, err := redisstore.New(c, &redisstore.Options{Prefix: "bench:", Timeout: time.Second, DedupWindow: time.Second})
	if err != nil {
		return nil, err
	}
	w, err := s.Window(ratedb.FixedWindow, DefaultWindow)
	return redisstoreLimiter{w}, err
}

func (l redisstoreLimiter) Allow(ctx context.Context, key string) (bool, error) {
	r, err := l.w.Hit(ctx, key, AllowAll, 1)
	return r.Allowed, err
}

type redisRateLimiter struct {
	l     *redis_rate.Limiter
	limit redis_rate.Limit
}

func newRedisRate(c redis.UniversalClient) (RedisLimiter, error) {
	return redisRateLimiter{
		l:     redis_rate.NewLimiter(c),
		limit: redis_rate.Limit{Rate: int(AllowAll), Burst: int(AllowAll), Period: DefaultWindow},
	}, nil
}

func (l redisRateLimiter) Allow(ctx context.Context, key string) (bool, error) {
	r, err := l.l.Allow(ctx, key, l.limit)
	if err != nil {
		return false, err
	}
	return r.Allowed > 0, nil
}

type ululeRedisLimiter struct{ l *ulule.Limiter }

func newUluleRedis(c redis.UniversalClient) (RedisLimiter, error) {
	store, err := ululeredis.NewStoreWithOptions(c, ulule.StoreOptions{Prefix: "ulule"})
	if err != nil {
		return nil, err
	}
	return ululeRedisLimiter{ulule.New(store, ulule.Rate{Period: DefaultWindow, Limit: AllowAll})}, nil
}

func (l ululeRedisLimiter) Allow(ctx context.Context, key string) (bool, error) {
	r, err := l.l.Get(ctx, key)
	return !r.Reached, err
}

type bareEvalsha struct {
	c redis.UniversalClient
	s *redis.Script
}

func newBareEvalsha(c redis.UniversalClient) (RedisLimiter, error) {
	return bareEvalsha{c, redis.NewScript("return 1")}, nil
}

func (l bareEvalsha) Allow(ctx context.Context, key string) (bool, error) {
	v, err := l.s.Run(ctx, l.c, []string{key}).Int64()
	return v == 1, err
}

// RedisRow is one measured row: a limiter, a number of concurrent callers
// and a key set.
type RedisRow struct {
	Limiter  string
	Callers  int
	Keys     int // 1: one hot key
	Hits     int64
	Allowed  int64
	Errors   int64
	Elapsed  time.Duration
	P50, P99 time.Duration
	// ServerPerCall is Redis's mean time per script call (µs) over the
	// timed hits, from INFO commandstats; RunRedis leaves it to the caller,
	// which resets the statistics in RunRedis's timed function.
	ServerPerCall float64
}

// PerSecond is the rate of allowed hits.
func (r RedisRow) PerSecond() float64 { return float64(r.Allowed) / r.Elapsed.Seconds() }

// RunRedis measures lim with callers goroutines for d over keys. It first
// hits every key once, untimed, so that the timed part starts with every key
// present; then, with no call in flight, it calls timed (unless nil), whose
// error ends the run; then it times the hits. A caller that reads the
// server's statistics for the row (INFO commandstats) resets them in timed,
// so that they cover the timed hits and not the untimed pass, which creates
// every key. Once ctx ends, it stops and returns ctx's error.
func RunRedis(ctx context.Context, lim RedisLimiter, name string, callers int, keys []string, d time.Duration, timed func() error) (RedisRow, error) {
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ { // warm-up: every key once
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(keys) && ctx.Err() == nil; i += callers {
				_, _ = lim.Allow(ctx, keys[i])
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return RedisRow{Limiter: name, Callers: callers, Keys: len(keys)}, err
	}
	if timed != nil {
		if err := timed(); err != nil {
			return RedisRow{Limiter: name, Callers: callers, Keys: len(keys)}, err
		}
	}
	type part struct {
		lat             []time.Duration
		allowed, errors int64
	}
	parts := make([]part, callers)
	start := time.Now()
	deadline := start.Add(d)
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &parts[g]
			p.lat = make([]time.Duration, 0, 1<<16)
			for i := g; ; i += callers {
				t0 := time.Now()
				if t0.After(deadline) || ctx.Err() != nil {
					return
				}
				ok, err := lim.Allow(ctx, keys[i%len(keys)])
				p.lat = append(p.lat, time.Since(t0))
				switch {
				case err != nil:
					p.errors++
				case ok:
					p.allowed++
				}
			}
		}()
	}
	wg.Wait()
	row := RedisRow{Limiter: name, Callers: callers, Keys: len(keys), Elapsed: time.Since(start)}
	if err := ctx.Err(); err != nil {
		return row, err
	}
	var all []time.Duration
	for _, p := range parts {
		all = append(all, p.lat...)
		row.Allowed += p.allowed
		row.Errors += p.errors
	}
	row.Hits = int64(len(all))
	slices.Sort(all)
	if len(all) > 0 {
		row.P50 = all[len(all)/2]
		row.P99 = all[len(all)*99/100]
	}
	return row, nil
}

// NeedRedisServer skips the test when redis-server is not on PATH, or fails
// it when RATEDB_REQUIRE_REDIS=1 (as scripts/test.sh sets), so that the
// smoke tests of the Redis benchmark cannot pass unrun in CI.
func NeedRedisServer(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err == nil {
		return
	}
	if os.Getenv("RATEDB_REQUIRE_REDIS") == "1" {
		t.Fatal("redis-server is not on PATH and RATEDB_REQUIRE_REDIS=1 (install it: apt-get install -y redis-server)")
	}
	t.Skip("redis-server is not on PATH")
}

// RedisServer is a throwaway redis-server on a loopback port, without
// persistence, in its own directory.
type RedisServer struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis starts redis-server in dir and waits until it answers.
func StartRedis(dir string) (*RedisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("bench: redis-server is not on PATH (apt-get install -y redis-server): %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return nil, fmt.Errorf("bench: redis-server exited: %s", log)
		default:
		}
		if c.Ping(context.Background()).Err() == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, errors.New("bench: redis-server did not answer within 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling the server coming up
	}
}

// Version returns the server's version.
func (s *RedisServer) Version() string {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	info, err := c.InfoMap(context.Background(), "server").Result()
	if err != nil {
		return "?"
	}
	return info["Server"]["redis_version"]
}

// Stop kills the server and waits for it.
func (s *RedisServer) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}
