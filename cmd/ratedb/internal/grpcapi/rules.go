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

// maxOverrideWindows bounds the window lengths (unit × unit_multiplier,
// a multiplier above 1) that limit overrides may use: the store keeps every
// window length it is asked for until it closes (about 170 bytes each in
// the embedded DB), so a client giving each descriptor a new
// unit_multiplier would grow the process without end. An override that
// needs a length past these is refused (overrides.get).
const maxOverrideWindows = 1024

type overrideKey struct {
	requests uint32
	unit     envoyconf.Unit
	mult     uint32
}

// overrides caches the rules of per-request limit overrides and holds the
// window lengths they use. It is safe for concurrent use.
type overrides struct {
	mu      sync.RWMutex
	rules   map[overrideKey]*rule
	windows map[time.Duration]bool // of multipliers above 1
}

// get returns the rule of an override of requests per mult units
// (unit.Duration()*mult must not overflow), or false if its window is
// longer than its unit and maxOverrideWindows other such lengths are in
// use.
func (o *overrides) get(requests uint32, unit envoyconf.Unit, mult uint32, quota bool) (*rule, bool) {
	k := overrideKey{requests, unit, mult}
	o.mu.RLock()
	r := o.rules[k]
	o.mu.RUnlock()
	if r != nil {
		return r, true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev := o.rules[k]; prev != nil {
		return prev, true
	}
	if scale := unit.Duration() * time.Duration(mult); mult > 1 && !o.windows[scale] {
		if len(o.windows) >= maxOverrideWindows {
			return nil, false
		}
		if o.windows == nil {
			o.windows = map[time.Duration]bool{}
		}
		o.windows[scale] = true
	}
	r = newRule(&envoyconf.Limit{Path: overrideRuleName, RequestsPerUnit: requests, Unit: unit}, mult, quota)
	if o.rules == nil {
		o.rules = map[overrideKey]*rule{}
	}
	if len(o.rules) < maxOverrides {
		o.rules[k] = r
	}
	return r, true
}
