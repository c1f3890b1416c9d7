package grpcapi

import (
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/ratedb/ratedb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// rule is an envoyconf limit compiled for the core: built once per config
// load, so the core can cache its limiter on the *core.Limit.
type rule struct {
	limit     *core.Limit                        // nil when unlimited
	current   *rlsv3.RateLimitResponse_RateLimit // current_limit; read-only
	name      string                             // rate_limit name, for replaces
	replaces  []string
	unlimited bool
}

// compiled is a config with its rules; immutable once built.
type compiled struct {
	cfg   *envoyconf.Config
	rules map[*envoyconf.Limit]*rule
}

// compile builds the rules of cfg; with quota, every one is a quota_mode
// limit (Options.QuotaMode).
func compile(cfg *envoyconf.Config, quota bool) *compiled {
	c := &compiled{cfg: cfg, rules: map[*envoyconf.Limit]*rule{}}
	for _, r := range cfg.Rules() {
		c.rules[r.Limit] = newRule(r.Limit, 1, quota)
	}
	return c
}

// newRule compiles l, whose window is mult of its unit (a limit override's
// unit_multiplier; 1 for the config's limits).
func newRule(l *envoyconf.Limit, mult uint32, quota bool) *rule {
	r := &rule{name: l.Name, replaces: l.Replaces, unlimited: l.Unlimited}
	if l.Unlimited {
		return r
	}
	r.limit = &core.Limit{
		Name:      l.Path,
		Algorithm: ratedb.FixedWindow,
		Tiers:     []ratedb.Tier{{Scale: l.Unit.Duration() * time.Duration(mult), Limit: int64(l.RequestsPerUnit)}},
		Shadow:    l.ShadowMode,
		Quota:     l.QuotaMode || quota,
	}
	r.current = &rlsv3.RateLimitResponse_RateLimit{
		Name:            l.Name,
		RequestsPerUnit: l.RequestsPerUnit,
		Unit:            rlsv3.RateLimitResponse_RateLimit_Unit(l.Unit),
	}
	if mult > 1 {
		r.current.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return r
}

// overrideRuleName is the rule name (the metrics label) of every
// per-request limit override.
const overrideRuleName = "envoy-override"

// maxOverrides bounds the cache of compiled overrides; past it an override
// is compiled per request (correct, only slower).
const maxOverrides = 4096

type overrideKey struct {
	requests uint32
	unit     envoyconf.Unit
	mult     uint32
}

// overrides caches the rules of per-request limit overrides. It is safe for
// concurrent use.
type overrides struct {
	mu    sync.RWMutex
	rules map[overrideKey]*rule
}

// get returns the rule of an override of requests per mult units
// (unit.Duration()*mult must not overflow).
func (o *overrides) get(requests uint32, unit envoyconf.Unit, mult uint32, quota bool) *rule {
	k := overrideKey{requests, unit, mult}
	o.mu.RLock()
	r := o.rules[k]
	o.mu.RUnlock()
	if r != nil {
		return r
	}
	r = newRule(&envoyconf.Limit{Path: overrideRuleName, RequestsPerUnit: requests, Unit: unit}, mult, quota)
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev := o.rules[k]; prev != nil {
		return prev
	}
	if o.rules == nil {
		o.rules = map[overrideKey]*rule{}
	}
	if len(o.rules) < maxOverrides {
		o.rules[k] = r
	}
	return r
}
