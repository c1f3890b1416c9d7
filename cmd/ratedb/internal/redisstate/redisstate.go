// Package redisstate keeps the service's state in Redis (--redis): counts
// through redisstore, and the rules as one JSON value.
package redisstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
)

// RulesKey is the Redis key holding the rules (redisstore's keys all have a
// '{' right after the prefix, so it never meets one of them).
const RulesKey = redisstore.DefaultPrefix + "rules"

// Timeout is the default bound on each Redis call of a check
// (--redis-timeout).
const Timeout = 100 * time.Millisecond

// NewClient connects to the Redis deployment named by spec:
// redis://[user:password@]host:port[/db] (or rediss:// for TLS) for one
// server, or a comma-separated list of addresses (host:port or redis://
// URLs) for a Cluster. It does not contact Redis.
func NewClient(spec string) (redis.UniversalClient, error) {
	if strings.Contains(spec, ",") {
		var addrs []string
		var base *redis.Options
		for _, a := range strings.Split(spec, ",") {
			a = strings.TrimSpace(a)
			if a == "" {
				continue
			}
			if strings.Contains(a, "://") {
				o, err := redis.ParseURL(a)
				if err != nil {
					return nil, fmt.Errorf("--redis: %s", describeURLError(err))
				}
				base = o
				a = o.Addr
			}
			addrs = append(addrs, a)
		}
		co := &redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true}
		if base != nil {
			co.Username, co.Password, co.TLSConfig = base.Username, base.Password, base.TLSConfig
		}
		return redis.NewClusterClient(co), nil
	}
	o, err := redis.ParseURL(spec)
	if err != nil {
		return nil, fmt.Errorf("--redis: %s", describeURLError(err))
	}
	o.ContextTimeoutEnabled = true
	return redis.NewClient(o), nil
}

// describeURLError says what is wrong without repeating the URL (which may
// hold a password).
func describeURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return "not a redis:// URL: " + ue.Err.Error()
	}
	return "not a redis:// URL (redis://host:port/db) or a comma list of Cluster addresses"
}

// Store adapts a redisstore.Store to core.Store. It is safe for concurrent
// use.
type Store struct{ S *redisstore.Store }

// Window implements core.Store.
func (s Store) Window(alg ratedb.Algorithm, scale time.Duration) (core.WindowLimiter, error) {
	w, err := s.S.Window(alg, scale)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Layered implements core.Store.
func (s Store) Layered(alg ratedb.Algorithm, tiers ...ratedb.Tier) (core.LayeredLimiter, error) {
	l, err := s.S.Layered(alg, tiers...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

var _ core.Store = Store{}

// RulesStorage keeps the rules as one JSON value under RulesKey. It is safe
// for concurrent use.
type RulesStorage struct{ C redis.UniversalClient }

// Load implements rules.Storage.
func (r RulesStorage) Load() ([]rules.Stored, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout*10)
	defer cancel()
	b, err := r.C.Get(ctx, RulesKey).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rules: reading %s from Redis: %w (%w)", RulesKey, err, ratedb.ErrUnavailable)
	}
	var rs []rules.Stored
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("rules: %s in Redis is not a rules list: %w", RulesKey, err)
	}
	return rs, nil
}

// Save implements rules.Storage.
func (r RulesStorage) Save(rs []rules.Stored) error {
	b, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout*10)
	defer cancel()
	if err := r.C.Set(ctx, RulesKey, b, 0).Err(); err != nil {
		return fmt.Errorf("rules: writing %s to Redis: %w (%w)", RulesKey, err, ratedb.ErrUnavailable)
	}
	return nil
}

var _ rules.Storage = RulesStorage{}
