package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/logthrottle"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/ratedb/ratedb/ratedbprom"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
)

// rulesReloadPeriod is how often an instance on Redis rereads the shared
// rules, so that a change made through another instance applies here too.
var rulesReloadPeriod = 2 * time.Second // a variable for tests

// state is where the service keeps counts and rules.
type state struct {
	name  string // for logs: the file, or "redis"
	store core.Store
	// clock is the clock of the store's windows, on which the APIs
	// measure the time until a window ends; nil: each API's default (this
	// host's clock, which the embedded DB's follows).
	clock       func() time.Time
	rules       rules.Storage
	collectors  []prometheus.Collector
	ready       func(context.Context) error
	close       func() error
	stopped     string        // logged after a graceful stop
	reloadRules time.Duration // 0: rules change only through this process
	// checkConfig, if not nil, logs what the store's configuration risks.
	// Run calls it once the store has answered (the rules were read), so
	// that a store that does not answer fails the start without waiting
	// for it.
	checkConfig func()
}

// openState opens the embedded file (--db) or connects to Redis (--redis).
func openState(c *Config, log *slog.Logger) (*state, error) {
	if c.Redis != "" {
		return openRedis(c, log)
	}
	db, err := ratedb.Open(c.DB, &ratedb.Options{Logger: log, SnapshotPeriod: c.SnapshotPeriod})
	if errors.Is(err, ratedb.ErrLocked) {
		return nil, fmt.Errorf("%s is in use by another ratedb process (its lock is held): %w", c.DB, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", c.DB, err)
	}
	// The state file's lock is held: no other process saves the rules
	// file now, and this one has not yet.
	rs := rules.FileStorage{Path: rules.RulesPath(c.DB)}
	if n := rs.RemoveLeftovers(); n > 0 {
		log.Warn("removed files left by a save of the rules that did not finish (the rules file was kept whole)", "path", rs.Path, "files", n)
	}
	return &state{
		name:       c.DB,
		store:      core.DBStore{DB: db},
		rules:      rs,
		collectors: []prometheus.Collector{ratedbprom.NewCollector(db)},
		// Ready when a snapshot succeeds (it waits for the file's audit
		// after Open).
		ready: newReadiness(db.Snapshot, readyPeriod, time.Now, log).ready,
		close: func() error {
			if err := db.Close(); err != nil && !errors.Is(err, ratedb.ErrClosed) {
				return fmt.Errorf("closing %s: %w", c.DB, err)
			}
			return nil
		},
		stopped: "final snapshot written",
	}, nil
}

// redisLogger passes go-redis's own messages (a failed dial, a cluster
// state reload) to the service's logger, so that they follow --log-format
// and --log-level instead of going to stderr in go-redis's format.
// At most one line a second gets through: a failed dial is logged for each
// request that tries one while Redis is down.
type redisLogger struct {
	log      *slog.Logger
	throttle logthrottle.Throttle
}

func (l *redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if ok, held := l.throttle.Allow(); ok {
		l.log.WarnContext(ctx, "redis client", "detail", fmt.Sprintf(format, v...), "similar_lines_held_back", held)
	}
}

// testRedisClock is the Redis store's clock: redisstore.ServerClock, or
// another a test sets, as a Redis whose TIME is not this host's.
var testRedisClock redisstore.Clock

func openRedis(c *Config, log *slog.Logger) (*state, error) {
	redis.SetLogger(&redisLogger{log: log})
	client, err := redisstate.NewClient(c.Redis)
	if err != nil {
		return nil, err
	}
	rulesStorage := redisstate.RulesStorage{C: client, Timeout: 10 * c.RedisTimeout}
	// Bounded as the rules read that follows: a Redis that does not answer
	// ends the start after one bound (1 s by default), not two.
	ctx, cancel := context.WithTimeout(context.Background(), rulesStorage.CallTimeout())
	err = redisstate.CheckNotClusterNode(ctx, client)
	cancel()
	if err != nil {
		client.Close()
		return nil, err
	}
	// The scripts read Redis's clock (ServerClock): the APIs measure the
	// time until a window ends on it too, as every answer reports it.
	clock := redisstate.NewClock()
	rs, err := redisstore.New(client, &redisstore.Options{Timeout: c.RedisTimeout, Clock: testRedisClock, OnTime: clock.Observe})
	if err != nil {
		client.Close()
		return nil, err
	}
	return &state{
		name:  "redis",
		store: redisstate.Store{S: rs},
		clock: clock.Now,
		rules: rulesStorage,
		// Ready when Redis accepts a write within the bound of a check's
		// call: a PING is answered by a replica, by a Redis out of memory
		// and by one paused for writes, all of which fail every check.
		ready: newReadiness(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), c.RedisTimeout)
			defer cancel()
			return redisstate.Ready(ctx, client)
		}, readyPeriod, time.Now, log).ready,
		close:       client.Close,
		stopped:     "Redis client closed",
		reloadRules: rulesReloadPeriod,
		checkConfig: func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.RedisTimeout)
			defer cancel()
			checkEviction(ctx, client, log)
		},
	}, nil
}

// checkEviction logs a warning if a Redis server of client may evict keys
// (its maxmemory-policy is not noeviction), and a line at info level if a
// policy could not be read within ctx; it never fails.
func checkEviction(ctx context.Context, client redis.UniversalClient, log *slog.Logger) {
	evicting, err := redisstate.EvictingNodes(ctx, client)
	if len(evicting) > 0 {
		var policies, nodes []string
		for _, n := range evicting {
			if !slices.Contains(policies, n.Policy) {
				policies = append(policies, n.Policy)
			}
			nodes = append(nodes, n.Addr)
		}
		log.Warn("redis: its maxmemory-policy evicts keys, so counts can be lost under memory pressure (callers then get more than their limit), "+
			"and the rules too with allkeys-*: set maxmemory-policy noeviction",
			"maxmemory_policy", strings.Join(policies, ","), "nodes", strings.Join(nodes, ","))
	}
	if err != nil {
		log.Info("redis: maxmemory-policy could not be checked (CONFIG GET refused or not answered within --redis-timeout); "+
			"any policy but noeviction can lose counts under memory pressure", "err", err)
	}
}
