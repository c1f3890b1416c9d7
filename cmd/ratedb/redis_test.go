package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedisSharedCountsAndRules(t *testing.T) {
	t.Parallel()
	addr, _ := proctest.StartRedis(t)
	url := "redis://" + addr + "/0"
	args := []string{"--redis", url, "--default-limit", "40", "--default-algorithm", "per_key", "--default-window", "1h",
		// Exactness, not latency, is under test: a loaded CI machine may
		// take longer than the default 100 ms for a call.
		"--redis-timeout", "5s"}
	// Two instances on one Redis share every count.
	a := start(t, "", args...)
	b := start(t, "", args...)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range 10 {
				if s.check("shared", "/r").Status == "Allow" {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(40), allowed.Load(), "exactly the limit across both instances")

	// A rule stored through one instance reaches the other (it rereads
	// the rules every 2 s) and survives a restart.
	code, _, body := a.do("PUT", "/v1/rules/vip", adminKey, `{"client_id":"vip","route":"*","algorithm":"per_key","limit":3,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	assert.Equal(t, int64(3), a.check("vip", "/r").Limit)
	deadline := time.Now().Add(10 * time.Second)
	for b.check("vip", "/x").Limit != 3 {
		require.True(t, time.Now().Before(deadline), "the other instance never saw the rule")
		time.Sleep(50 * time.Millisecond) // polling another process's periodic reload
	}
	require.Equal(t, 0, a.stop(syscall.SIGTERM))
	a = start(t, "", args...)
	d := a.check("vip", "/r")
	assert.Equal(t, int64(3), d.Limit, "the rule survives the restart")
	assert.Equal(t, int64(1), d.Remain, "and so does the count")
	code, _, _ = a.do("GET", "/readyz", "", "")
	assert.Equal(t, http.StatusOK, code)
}

// The same on a Redis Cluster (--redis as a comma list of its nodes): two
// instances share every count, each client id exactly at its limit, and a
// rule stored through one reaches the other. The counters spread over every
// node (each key's hash tag is its own user key, never the prefix), and the
// rules key is read and written wherever its slot lives.
func TestRedisClusterSharedCountsAndRules(t *testing.T) {
	t.Parallel()
	addrs := proctest.StartCluster(t)
	args := []string{"--redis", strings.Join(addrs, ","), "--default-limit", "5", "--default-algorithm", "per_key",
		"--default-window", "1h", "--redis-timeout", "5s"}
	a := start(t, "", args...)
	b := start(t, "", args...)
	const clients = 30
	var allowed [clients]atomic.Int64
	var wg sync.WaitGroup
	for i := range 6 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for k := range clients {
				for range 2 {
					if s.check(fmt.Sprint("client-", k), "/r").Status == "Allow" {
						allowed[k].Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	for k := range clients {
		assert.Equal(t, int64(5), allowed[k].Load(), "client-%d: exactly the limit across both instances", k)
	}
	ctx := context.Background()
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		keys, _, err := c.Scan(ctx, 0, "*", 1000).Result() // a few dozen keys: one SCAN call reads them all
		_ = c.Close()
		require.NoError(t, err)
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == redisstate.RulesKey })
		assert.NotEmpty(t, keys, "node %s holds no counter: the keys do not spread over the Cluster", addr)
	}

	code, _, body := a.do("PUT", "/v1/rules/vip", adminKey, `{"client_id":"vip","route":"*","algorithm":"per_key","limit":3,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	assert.Equal(t, int64(3), a.check("vip", "/r").Limit)
	deadline := time.Now().Add(10 * time.Second)
	for b.check("vip", "/x").Limit != 3 {
		require.True(t, time.Now().Before(deadline), "the other instance never saw the rule")
		time.Sleep(50 * time.Millisecond) // polling another process's periodic reload
	}
	code, _, _ = a.do("GET", "/readyz", "", "")
	assert.Equal(t, http.StatusOK, code)
}

func TestRedisDown(t *testing.T) {
	t.Parallel()
	addr, kill := proctest.StartRedis(t)
	url := "redis://" + addr + "/0"
	closed := start(t, "", "--redis", url)
	open := start(t, "", "--redis", url, "--fail-open")
	assert.Equal(t, "Allow", closed.check("c", "/r").Status)
	kill()

	code, _, body := closed.do("POST", "/v1/check", clientKey, `{"client_id":"c","route":"/r"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	assert.Contains(t, body, `"status":"error"`)
	assert.Contains(t, body, "unavailable")
	code, _, _ = closed.do("GET", "/readyz", "", "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	code, _, _ = closed.do("GET", "/healthz", "", "")
	assert.Equal(t, http.StatusOK, code)
	code, _, body = closed.do("PUT", "/v1/rules/r", adminKey, `{"client_id":"*","route":"/r","limit":5,"window":"1m"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code, "a rule change while Redis is down: %s", body)
	code, _, body = closed.do("DELETE", "/v1/rules/r", adminKey, "")
	assert.Equal(t, http.StatusServiceUnavailable, code, "a rule change while Redis is down: %s", body)

	code, h, body := open.do("POST", "/v1/check", clientKey, `{"client_id":"c","route":"/r"}`)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"status":"Allow"`)
	assert.Contains(t, body, `"fail_open":true`)
	assert.Equal(t, "true", h.Get("X-Ratedb-Fail-Open"))
	_, _, metrics := open.do("GET", "/metrics", "", "")
	assert.Contains(t, metrics, `ratedb_store_errors_total{api="http",rule="default"} 1`)
	// Failing open is logged, with the store's error, never the client.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(open.stderr.String(), "check failed open: the store failed") {
		require.True(t, time.Now().Before(deadline), "failing open was not logged:\n%s", open.stderr)
		time.Sleep(10 * time.Millisecond) // polling another process's log
	}
	assert.Contains(t, open.stderr.String(), "unavailable")
	assert.NotContains(t, open.stderr.String(), `client_id`)
}

func TestRedisBadURL(t *testing.T) {
	t.Parallel()
	_, stderr, code := runTool(t, "serve", "--redis", "http://user:secretpw@x", "--http", "127.0.0.1:0")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--redis")
	assert.NotContains(t, stderr, "secretpw", "the URL may hold a password")
	_, stderr, code = runTool(t, "serve", "--fail-open", "--db", filepath.Join(t.TempDir(), "x.db"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--fail-open applies only with --redis")
}

// README: the service needs Redis to start, and exits if Redis does not
// answer within 1 s (the bound of a rules read: ten times --redis-timeout,
// at least 1 s). It first waited 5 s for the probe that refuses a Cluster
// node, then 1 s more for the rules: 6 s before a deploy learnt that its
// Redis was not there.
func TestRedisNotAnsweringAtStartExitsWithinItsBound(t *testing.T) {
	t.Parallel()
	addr := proctest.StartStoppedRedis(t)
	binary(t) // built before the clock starts
	begin := time.Now()
	_, stderr, code := runToolWithin(t, 30*time.Second, "serve", "--http", "127.0.0.1:0",
		"--redis", "redis://"+addr+"/0", "--fail-open")
	elapsed := time.Since(begin)
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "Redis")
	assert.Contains(t, stderr, "unavailable")
	// 1 s, plus the start and end of a process on a loaded machine.
	assert.Less(t, elapsed, 3*time.Second, "serve took %v to give up on a Redis that does not answer", elapsed)
}

// A stored rule this version refuses (here written into Redis by hand, as
// another version of ratedb might store one) neither stops the running
// instances from changing the rules, nor from seeing each other's changes,
// nor stays beyond repair: a DELETE through the API removes it, and a
// restart then succeeds.
func TestRedisInvalidStoredRuleIsRepairedThroughTheAPI(t *testing.T) {
	t.Parallel()
	addr, _ := proctest.StartRedis(t)
	args := []string{"--redis", "redis://" + addr + "/0", "--redis-timeout", "5s"}
	a := start(t, "", args...)
	code, _, body := a.do("PUT", "/v1/rules/good", adminKey, `{"client_id":"g","route":"*","limit":3,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	peer := start(t, "", args...) // an instance that rereads the rules
	assert.Equal(t, int64(3), peer.check("g", "/r").Limit)

	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	cur, err := c.Get(ctx, redisstate.RulesKey).Result()
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(cur, "]"), cur)
	bad := `{"name":"bad","client_id":"b","route":"*","limit":-1,"window":"1h","generation":2}`
	require.NoError(t, c.Set(ctx, redisstate.RulesKey, strings.TrimSuffix(cur, "]")+","+bad+"]", 0).Err())

	code, _, body = a.do("PUT", "/v1/rules/other", adminKey, `{"client_id":"o","route":"*","limit":5,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	after, err := c.Get(ctx, redisstate.RulesKey).Result()
	require.NoError(t, err)
	assert.Contains(t, after, `"name":"bad"`, "kept as stored")
	// The other instance's reloads apply the change around the rule they
	// refuse.
	deadline := time.Now().Add(10 * time.Second)
	for peer.check("o", "/r").Limit != 5 {
		require.True(t, time.Now().Before(deadline), "the other instance never saw the rule stored beside the refused one")
		time.Sleep(50 * time.Millisecond) // polling another process's periodic reload
	}
	assert.Equal(t, int64(3), peer.check("g", "/r").Limit)

	ctx30, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b := exec.CommandContext(ctx30, binary(t), append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	b.Env = append(os.Environ(), "RATEDB_API_KEYS="+clientKey, "RATEDB_ADMIN_KEYS="+adminKey)
	out, err := b.CombinedOutput()
	require.Error(t, err, "an instance does not start on a rule it refuses")
	assert.Contains(t, string(out), `stored rule "bad"`)

	code, _, body = a.do("DELETE", "/v1/rules/bad", adminKey, "")
	require.Equal(t, http.StatusOK, code, body)
	a2 := start(t, "", args...)
	assert.Equal(t, int64(3), a2.check("g", "/r").Limit)
	assert.Equal(t, int64(5), a2.check("o", "/r").Limit)
}

// The rules live in Redis: when Redis loses its data (a restart without
// persistence, a flush), an instance falls back to the default rule at its
// next reload, and says so in its log rather than silently.
func TestRedisLostRulesAreLogged(t *testing.T) {
	t.Parallel()
	addr, _ := proctest.StartRedis(t)
	args := []string{"--redis", "redis://" + addr + "/0", "--redis-timeout", "5s"}
	a := start(t, "", args...)
	code, _, body := a.do("PUT", "/v1/rules/vip", adminKey, `{"client_id":"vip","route":"*","limit":3,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	assert.Equal(t, int64(3), a.check("vip", "/r").Limit)

	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	require.NoError(t, c.FlushAll(context.Background()).Err())
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(a.stderr.String(), "none are stored any more") {
		require.True(t, time.Now().Before(deadline), "no warning of the lost rules:\n%s", a.stderr)
		time.Sleep(20 * time.Millisecond) // polling another process's periodic reload
	}
	assert.NotEqual(t, int64(3), a.check("vip", "/r").Limit, "the default rule applies")
}

// --redis naming one node of a Redis Cluster would start, answer PING and
// then fail every check of a key another node owns (MOVED): the service
// refuses to start instead, and says how to list the nodes.
func TestRedisOneClusterNodeRefused(t *testing.T) {
	t.Parallel()
	addrs := proctest.StartCluster(t)
	_, stderr, code := runToolWithin(t, 30*time.Second, "serve", "--http", "127.0.0.1:0",
		"--redis", "redis://"+addrs[0])
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "one node of a Redis Cluster")
	assert.Contains(t, stderr, "comma list")
}

// /readyz says whether checks can be answered, not only whether Redis
// answers a PING: a Redis that answers PING but refuses every check's write
// (a replica after a failover: READONLY; maxmemory reached under
// noeviction: OOM; CLIENT PAUSE WRITE) is not ready, and is again once it
// accepts writes, without a restart. Nor is one that answers, but slower
// than --redis-timeout, the bound every check gets.
func TestRedisReadyzFollowsWhatChecksNeed(t *testing.T) {
	t.Parallel()
	addr, _ := proctest.StartRedis(t)
	other, _ := proctest.StartRedis(t) // a master to make addr a replica of
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	s := start(t, "", "--redis", "redis://"+addr+"/0", "--redis-timeout", "1s")
	eventually := s.eventuallyReady
	checkCode := func() int {
		code, _, _ := s.do("POST", "/v1/check", clientKey, `{"client_id":"c","route":"/r"}`)
		return code
	}
	eventually(http.StatusOK, "at start")

	host, port, _ := strings.Cut(other, ":")
	for _, tc := range []struct {
		name          string
		break_, mend  func() error
		checksRefused bool // a check answers 503 meanwhile (CLIENT PAUSE WRITE holds it instead)
	}{
		{"replica (READONLY)",
			func() error { return c.ReplicaOf(ctx, host, port).Err() },
			func() error { return c.ReplicaOf(ctx, "NO", "ONE").Err() }, true},
		{"out of memory under noeviction (OOM)",
			func() error { return c.ConfigSet(ctx, "maxmemory", "1").Err() },
			func() error { return c.ConfigSet(ctx, "maxmemory", "0").Err() }, true},
		{"CLIENT PAUSE WRITE",
			func() error { return c.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err() },
			func() error { return c.Do(ctx, "CLIENT", "UNPAUSE").Err() }, false},
	} {
		require.NoError(t, tc.break_(), tc.name)
		if tc.checksRefused {
			require.Equal(t, http.StatusServiceUnavailable, checkCode(), "%s: checks fail", tc.name)
		}
		eventually(http.StatusServiceUnavailable, tc.name)
		require.NoError(t, tc.mend(), tc.name)
		eventually(http.StatusOK, tc.name+", mended")
		assert.Equal(t, http.StatusOK, checkCode(), "%s, mended: checks work again", tc.name)
	}

	// Slower than --redis-timeout (here 100 ms): Redis holds every command
	// for 600 ms, less than a second. A check then answers 503; so must a
	// readiness check that starts during the pause.
	fast := start(t, "", "--redis", "redis://"+addr+"/0")
	pauser := redis.NewClient(&redis.Options{Addr: addr})
	defer pauser.Close()
	seen := false
	for attempt := 0; attempt < 10 && !seen; attempt++ {
		require.NoError(t, pauser.ClientPause(ctx, 600*time.Millisecond).Err())
		paused := time.Now()
		for !seen && time.Since(paused) < 500*time.Millisecond {
			code, _, _ := fast.do("GET", "/readyz", "", "")
			seen = code == http.StatusServiceUnavailable
		}
		// The next CLIENT PAUSE waits for this one to end.
	}
	assert.True(t, seen, "/readyz answered 200 throughout pauses longer than --redis-timeout\n%s", fast.stderr)
}

// eventuallyReady polls /readyz (an outcome answers for a second) until it
// answers want, for up to 10 s.
func (s *service) eventuallyReady(want int, what string) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, _ := s.do("GET", "/readyz", "", "")
		if code == want {
			return
		}
		require.True(s.t, time.Now().Before(deadline), "%s: /readyz never answered %d\n%s", what, want, s.stderr)
		time.Sleep(20 * time.Millisecond) // polling another process's cached readiness
	}
}

// A Redis that crashes and comes back needs no restart of the service:
// while it is down a check and a rule change answer 503, and so does
// /readyz; once it is back, they work again. Restarted with its AOF, Redis
// still holds the counts and the rules; restarted empty, it has lost both:
// the instance serves the default rule from its next reread of the rules,
// and says so in its log.
func TestRedisRestartNeedsNoServiceRestart(t *testing.T) {
	t.Parallel()
	addr, free := proctest.StartRedis(t)
	free() // only its port is wanted: the servers below restart on it
	dir := t.TempDir()
	persistent := []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}
	kill := proctest.StartRedisAt(t, addr, dir, persistent...)
	// Recovery, not latency, is under test.
	s := start(t, "", "--redis", "redis://"+addr+"/0", "--redis-timeout", "1s")
	code, _, body := s.do("PUT", "/v1/rules/vip", adminKey, `{"client_id":"vip","route":"*","limit":5,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	s.check("vip", "/r")
	require.Equal(t, int64(3), s.check("vip", "/r").Remain)

	kill() // a crash
	code, _, body = s.do("POST", "/v1/check", clientKey, `{"client_id":"vip","route":"/r"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	code, _, body = s.do("PUT", "/v1/rules/other", adminKey, `{"client_id":"o","route":"*","limit":7,"window":"1h"}`)
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	s.eventuallyReady(http.StatusServiceUnavailable, "Redis down")

	kill = proctest.StartRedisAt(t, addr, dir, persistent...) // with its AOF
	s.eventuallyReady(http.StatusOK, "Redis back with its AOF")
	d := s.check("vip", "/r")
	assert.Equal(t, int64(5), d.Limit, "the rule is kept")
	assert.Equal(t, int64(2), d.Remain, "the count is kept")
	code, _, body = s.do("PUT", "/v1/rules/other", adminKey, `{"client_id":"o","route":"*","limit":7,"window":"1h"}`)
	assert.Equal(t, http.StatusCreated, code, "a rule change: %s", body)

	kill()
	proctest.StartRedisAt(t, addr, t.TempDir(), "--save", "", "--appendonly", "no") // empty
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.stderr.String(), "none are stored any more") {
		require.True(t, time.Now().Before(deadline), "no warning of the lost rules:\n%s", s.stderr)
		time.Sleep(20 * time.Millisecond) // polling another process's periodic reload
	}
	d = s.check("vip", "/r")
	assert.Equal(t, int64(100), d.Limit, "the default rule applies")
	assert.Equal(t, int64(99), d.Remain, "the count starts again")
	s.eventuallyReady(http.StatusOK, "Redis back empty")
}

// An evicting maxmemory-policy silently forgets counts under memory
// pressure (callers then get more than their limit): the service reads the
// policy at start and logs one warning, naming the policy and what to set,
// when it is anything but noeviction (allkeys-* evicts any key, volatile-*
// any key with a TTL, as every count's key has). Redis's default,
// noeviction, gives no warning. A Redis that refuses CONFIG (managed
// services rename or forbid it) starts all the same, with one line at info
// level saying that the policy could not be checked.
func TestRedisEvictingPolicyIsWarnedAtStart(t *testing.T) {
	t.Parallel()
	warning := regexp.MustCompile(`level=WARN msg="redis: its maxmemory-policy evicts keys, [^"]*set maxmemory-policy noeviction" maxmemory_policy=(\S+)`)
	unchecked := regexp.MustCompile(`level=INFO msg="redis: maxmemory-policy could not be checked [^"]*" err="[^"]*unknown command 'config'`)
	for _, tc := range []struct {
		name      string
		args      []string // the redis-server's
		policy    string   // warned about; "": no warning
		unchecked bool
	}{
		{"allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, "allkeys-lru", false},
		{"volatile-ttl", []string{"--maxmemory-policy", "volatile-ttl"}, "volatile-ttl", false},
		{"default noeviction", nil, "", false},
		{"CONFIG renamed away", []string{"--rename-command", "CONFIG", ""}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, free := proctest.StartRedis(t)
			free() // only its port is wanted
			proctest.StartRedisAt(t, addr, t.TempDir(), append([]string{"--save", "", "--appendonly", "no"}, tc.args...)...)
			// The check is bounded by --redis-timeout: a loaded machine
			// may take longer than the default 100 ms for it.
			s := start(t, "", "--redis", "redis://"+addr+"/0", "--redis-timeout", "5s")
			// Logged before the service listens, which start waited for.
			out := s.stderr.String()
			found := warning.FindAllStringSubmatch(out, -1)
			if tc.policy == "" {
				assert.Empty(t, found, "a warning for %s\n%s", tc.name, out)
			} else if assert.Len(t, found, 1, "one warning\n%s", out) {
				assert.Equal(t, tc.policy, found[0][1])
			}
			assert.Equal(t, tc.unchecked, unchecked.MatchString(out), "the could-not-check line\n%s", out)
			assert.Equal(t, "Allow", s.check("c", "/r").Status, "the service works all the same")
		})
	}
}

// --redis-timeout is at most 1h: rule reads and changes get ten times it,
// which overflowed time.Duration past about 29 years (2562047h, the
// largest duration, gave a negative bound, taken as 1 s). 1h itself
// serves.
func TestRedisTimeoutBounded(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"1h0m0.001s", "2562047h"} {
		_, stderr, code := runTool(t, "serve", "--http", "127.0.0.1:0", "--redis", "redis://127.0.0.1:1/0", "--redis-timeout", v)
		assert.Equal(t, 1, code, "--redis-timeout %s: %s", v, stderr)
		assert.Contains(t, stderr, "--redis-timeout must be at most 1h0m0s", "--redis-timeout %s", v)
		assert.NotContains(t, stderr, "listening", "--redis-timeout %s", v)
	}
	addr, _ := proctest.StartRedis(t)
	s := start(t, "", "--redis", "redis://"+addr+"/0", "--redis-timeout", "1h")
	assert.Equal(t, "Allow", s.check("c", "/r").Status)
	assert.Equal(t, 0, s.stop(syscall.SIGTERM), s.stderr.String())
}
