// Package redisstate keeps the service's state in Redis (--redis): counts
// through redisstore, and the rules as one JSON value.
package redisstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
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

// ReadyKey is the key of Ready's probe. Nothing ever writes it: Ready's
// SET only overwrites a key that exists.
const ReadyKey = redisstore.DefaultPrefix + "ready"

// Ready reports whether Redis accepts the writes that checks make, within
// ctx: it sends SET ReadyKey "" XX, a write that writes nothing (XX: only if
// the key exists, and it never does). Redis answers it as it answers a
// check's script, unlike a PING: with READONLY on a replica (a failover
// left --redis naming the old master), with OOM when maxmemory is reached
// under noeviction, and not at all while CLIENT PAUSE WRITE holds writes.
// On a Cluster it asks the node that owns ReadyKey's slot.
func Ready(ctx context.Context, c redis.UniversalClient) error {
	err := c.SetXX(ctx, ReadyKey, "", 0).Err()
	if errors.Is(err, redis.Nil) {
		return nil // not set, as it never exists: Redis accepted the write
	}
	return err
}

// Timeout is the default bound on each Redis call of a check
// (--redis-timeout).
const Timeout = 100 * time.Millisecond

// NewClient connects to the Redis deployment named by spec:
// redis://[user:password@]host:port[/db] (or rediss:// for TLS) for one
// server, or a comma-separated list of addresses (host:port or redis://
// URLs) for a Cluster. The URLs of a Cluster list must agree on the user,
// password and TLS (they apply to every node) and name no database other
// than 0 and no options: what a Cluster client cannot use is refused, not
// dropped. With rediss://, go-redis shares one TLS configuration among all
// the nodes (those listed and those it discovers), so every node's
// certificate is verified against the host of the first URL of the list:
// the nodes' certificates must all be valid for that name. It does not
// contact Redis, unless a single server's URL asks for idle connections
// (?min_idle_conns=N): go-redis then opens them at once, in the
// background.
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
				// Only the user, password and TLS of the URLs apply to a
				// Cluster: refuse what would otherwise be dropped.
				u, _ := url.Parse(a) // parsed by ParseURL already
				switch {
				case o.Network != "tcp":
					return nil, errors.New("--redis: a Cluster address must be host:port or a redis:// or rediss:// URL (not a unix socket)")
				case o.DB != 0:
					return nil, errors.New("--redis: a Redis Cluster has only database 0: a Cluster URL cannot name another")
				case u == nil || u.RawQuery != "" || u.ForceQuery:
					return nil, errors.New("--redis: options (?...) in a Cluster URL are not supported")
				case base != nil && (o.Username != base.Username || o.Password != base.Password || (o.TLSConfig == nil) != (base.TLSConfig == nil)):
					return nil, errors.New("--redis: the Cluster URLs disagree on the user, the password or TLS (redis:// or rediss://)")
				}
				if base == nil {
					base = o
				}
				a = o.Addr
			} else if h, p, err := net.SplitHostPort(a); err != nil || h == "" || p == "" || strings.ContainsAny(a, "@/?#") {
				// Never pass on a (go-redis would log it at every dial):
				// "user:password@host:port" without a scheme is a
				// password in the clear.
				return nil, errors.New("--redis: a Cluster address is neither host:port nor a redis:// URL (credentials go in a redis:// URL)")
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
		// ue.Err quotes the URL ("invalid port \":pa\" after host" for a
		// password holding '/', '?' or '#'): never pass it on.
		return "not a valid URL (percent-encode '/', '?', '#', '@' and ':' in a user name or password)"
	}
	return "not a redis:// URL (redis://host:port/db) or a comma list of Cluster addresses"
}

// CheckNotClusterNode reports ErrClusterNode when c is a client of one
// server (not a ClusterClient) and that server runs in Cluster mode: keys
// that hash to the other nodes' slots would then answer MOVED and every
// check of them fail, while a PING still succeeds. A server that answers
// with an error (INFO renamed or not permitted) is not judged (nil). One
// that cannot be reached or does not answer within ctx is reported, as an
// error matching ratedb.ErrUnavailable: a caller that needs it to start
// should not wait for it a second time.
func CheckNotClusterNode(ctx context.Context, c redis.UniversalClient) error {
	if _, ok := c.(*redis.Client); !ok {
		return nil
	}
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		var answered redis.Error
		if errors.As(err, &answered) {
			return nil
		}
		return fmt.Errorf("--redis: no answer from Redis: %w (%w)", err, ratedb.ErrUnavailable)
	}
	if strings.Contains(info, "cluster_enabled:1") {
		return ErrClusterNode
	}
	return nil
}

// NodePolicy is the maxmemory-policy of one Redis server.
type NodePolicy struct {
	Addr   string // the server's address, as the client dials it
	Policy string // its maxmemory-policy, as CONFIG GET answers it
}

// EvictingNodes reads maxmemory-policy (CONFIG GET) from the server c
// reaches or, for a Cluster client, from every node it knows (masters and
// replicas, as the Cluster lists them), all within ctx. It returns the
// nodes whose policy is anything but noeviction, ordered by address:
// allkeys-* policies evict any key, volatile-* ones any key with a TTL,
// and every key of a count has one, so Redis may forget a live count
// under memory pressure. It reads the policy only, not maxmemory: one can
// be set at runtime, and managed services always set it. The error is
// non-nil when a node's policy could not be read (CONFIG refused, renamed
// or not permitted, as managed services often make it; no answer within
// ctx); the nodes read are returned all the same. It sends no key.
func EvictingNodes(ctx context.Context, c redis.UniversalClient) ([]NodePolicy, error) {
	var (
		mu       sync.Mutex
		evicting []NodePolicy
		errs     []error
	)
	read := func(ctx context.Context, n *redis.Client) error {
		addr := n.Options().Addr
		v, err := n.ConfigGet(ctx, "maxmemory-policy").Result()
		p := v["maxmemory-policy"]
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		case p == "":
			errs = append(errs, fmt.Errorf("%s: CONFIG GET maxmemory-policy answered no value", addr))
		case !strings.EqualFold(p, "noeviction"):
			evicting = append(evicting, NodePolicy{Addr: addr, Policy: p})
		}
		return nil // every node is read, whatever the others answer
	}
	switch c := c.(type) {
	case *redis.ClusterClient:
		if err := c.ForEachShard(ctx, read); err != nil {
			errs = append(errs, err) // the Cluster's nodes are not known
		}
	case *redis.Client:
		_ = read(ctx, c)
	default:
		errs = append(errs, fmt.Errorf("reading maxmemory-policy through a %T is not supported", c))
	}
	slices.SortFunc(evicting, func(a, b NodePolicy) int { return strings.Compare(a.Addr, b.Addr) })
	return evicting, errors.Join(errs...)
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

var (
	_ core.Store         = Store{}
	_ core.WindowStater  = (*redisstore.Window)(nil) // a peek reads one window
	_ core.LayeredStater = (*redisstore.Layered)(nil)
)

// RulesStorage keeps the rules as one JSON value under RulesKey. It is safe
// for concurrent use, by any number of processes: Update is an optimistic
// transaction (WATCH, then MULTI/EXEC), so two instances that change rules
// at once both keep their change.
//
// The rules' JSON value holds at most rules.MaxFileSize bytes (256 MiB), as
// the rules file does: Load refuses a larger value without reading it
// (ErrRulesTooLarge), and Update refuses to write one (rules.ErrRulesFileFull,
// which the API answers 507).
type RulesStorage struct {
	C redis.UniversalClient
	// Timeout bounds one Load or one Update: ten times --redis-timeout,
	// at least 1 s. Zero: 1 s.
	Timeout time.Duration

	maxSize int // the bound in bytes, set by tests; zero: rules.MaxFileSize
}

// limit is the bound of the rules' value in bytes: rules.MaxFileSize,
// unless a test set another.
func (r RulesStorage) limit() int {
	if r.maxSize > 0 {
		return r.maxSize
	}
	return rules.MaxFileSize
}

// CallTimeout is the bound of one Load or Update: Timeout, at least 1 s.
func (r RulesStorage) CallTimeout() time.Duration { return max(r.Timeout, time.Second) }

// updateAttempts is how many times Update retries when other writers keep
// changing the rules between its read and its write.
const updateAttempts = 16

// Load implements rules.Storage.
func (r RulesStorage) Load() ([]rules.Stored, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.CallTimeout())
	defer cancel()
	return loadRules(ctx, r.C, r.limit())
}

// boundedGet answers the value of KEYS[1] if it holds at most ARGV[1]
// bytes, else its length (an integer), in one atomic step: a value over
// the bound is never sent. No key answers nil. It is run read-only
// (EVALSHA_RO, Redis 7.0): a CLIENT PAUSE WRITE, as a failover makes, holds
// up every script run by EVALSHA, whatever it does, and so held up the
// periodic reload of the rules, and a shutdown waiting for it.
var boundedGet = redis.NewScript(`
local n = redis.call('STRLEN', KEYS[1])
if n > tonumber(ARGV[1]) then return n end
return redis.call('GET', KEYS[1])
`)

// loadRules reads the rules through c (a client or a transaction), if
// their value holds at most limit bytes.
func loadRules(ctx context.Context, c redis.Cmdable, limit int) ([]rules.Stored, error) {
	v, err := boundedGet.RunRO(ctx, c, []string{RulesKey}, limit).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rules: reading %s from Redis: %w (%w)", RulesKey, err, ratedb.ErrUnavailable)
	}
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	case int64:
		return nil, fmt.Errorf("rules: %s in Redis holds %d bytes: %w", RulesKey, v, ErrRulesTooLarge)
	default:
		return nil, fmt.Errorf("rules: reading %s from Redis: an answer of type %T (%w)", RulesKey, v, ratedb.ErrUnavailable)
	}
	var rs []rules.Stored
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("rules: %s in Redis is not a rules list: %w", RulesKey, err)
	}
	if rs == nil {
		// JSON null: encoding/json leaves the slice nil without an error,
		// which would read as "no rules". ratedb writes "[]" for none.
		return nil, fmt.Errorf("rules: %s in Redis is null, not a rules list", RulesKey)
	}
	return rs, nil
}

// errRulesContended is Update's error when other writers changed the rules
// between its read and its write on every attempt.
var errRulesContended = fmt.Errorf("rules: %s kept changing in Redis while being updated (%w)", RulesKey, ratedb.ErrUnavailable)

// Update implements rules.Storage: it reads the rules under WATCH and writes
// f's result in MULTI/EXEC, which Redis refuses if another client wrote the
// key since the read; it then reads again and calls f again.
func (r RulesStorage) Update(f func([]rules.Stored) ([]rules.Stored, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.CallTimeout())
	defer cancel()
	for range updateAttempts {
		var inner error // the error the transaction's function returned
		done := false   // the function ran and its EXEC wrote the rules
		err := r.C.Watch(ctx, func(tx *redis.Tx) error {
			inner = r.update(ctx, tx, f)
			done = inner == nil
			return inner
		}, RulesKey)
		switch {
		case err == nil && !done:
			// go-redis's ClusterClient.Watch returns nil without running
			// the function when MOVED/ASK redirections outnumber
			// MaxRedirects: while the key's slot migrates, WATCH on the
			// old owner answers ASK, and on the new one, sent without
			// ASKING, MOVED back. Nothing was written.
			return fmt.Errorf("rules: updating %s in Redis: its Cluster slot is moving, nothing was written (%w)", RulesKey, ratedb.ErrUnavailable)
		case errors.Is(err, redis.TxFailedErr):
			// Another writer came first: read again, after a pause of up
			// to a millisecond so that writers racing in step drift apart.
			time.Sleep(time.Duration(rand.Int64N(int64(time.Millisecond))))
			continue
		case err != nil && err != inner:
			// WATCH itself failed.
			return fmt.Errorf("rules: updating %s in Redis: %w (%w)", RulesKey, err, ratedb.ErrUnavailable)
		}
		return err
	}
	return errRulesContended
}

// update is one attempt of Update, in the WATCH transaction tx. It returns
// redis.TxFailedErr if another client wrote the rules since tx's WATCH.
func (r RulesStorage) update(ctx context.Context, tx *redis.Tx, f func([]rules.Stored) ([]rules.Stored, error)) error {
	cur, err := loadRules(ctx, tx, r.limit())
	if err != nil {
		return err
	}
	next, err := f(cur)
	if err != nil {
		return err
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if len(b) > r.limit() {
		// Never write a value that every Load would then refuse.
		return fmt.Errorf("rules: writing %d rules (%d bytes) to %s in Redis: %w", len(next), len(b), RulesKey, rules.ErrRulesFileFull)
	}
	_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, RulesKey, b, 0)
		return nil
	})
	if err != nil && !errors.Is(err, redis.TxFailedErr) {
		return fmt.Errorf("rules: writing %s to Redis: %w (%w)", RulesKey, err, ratedb.ErrUnavailable)
	}
	return err
}

var _ rules.Storage = RulesStorage{}
