package grpcapi

import (
	"slices"
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
		API:       core.APIEnvoy,
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
// needs a length past these is refused (overrides.getAll).
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

// getAll sets rules[i] to the rule of the override ks[i] (requests per
// mult units; unit.Duration()*mult must not overflow) for every ks[i] that
// is not the zero overrideKey. It returns false, and the first i whose
// override does not fit, changing nothing, if the window lengths longer
// than their unit that ks need would be more than maxOverrideWindows
// together with those in use: a request takes all its lengths or none.
func (o *overrides) getAll(ks []overrideKey, rules []*rule, quota bool) (int, bool) {
	missing := false
	o.mu.RLock()
	for i, k := range ks {
		if k != (overrideKey{}) {
			rules[i] = o.rules[k]
			missing = missing || rules[i] == nil
		}
	}
	o.mu.RUnlock()
	if !missing {
		return 0, true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	var added []time.Duration // the new lengths, to take back on failure
	for i, k := range ks {
		if k == (overrideKey{}) || rules[i] != nil {
			continue
		}
		if prev := o.rules[k]; prev != nil {
			rules[i] = prev
			continue
		}
		if j := slices.Index(ks[:i], k); j >= 0 {
			rules[i] = rules[j] // the same override twice in the request
			continue
		}
		if scale := k.unit.Duration() * time.Duration(k.mult); k.mult > 1 && !o.windows[scale] {
			if len(o.windows) >= maxOverrideWindows {
				for _, s := range added {
					delete(o.windows, s)
				}
				return i, false
			}
			if o.windows == nil {
				o.windows = map[time.Duration]bool{}
			}
			o.windows[scale] = true
			added = append(added, scale)
		}
		rules[i] = newRule(&envoyconf.Limit{Path: overrideRuleName, RequestsPerUnit: k.requests, Unit: k.unit}, k.mult, quota)
	}
	// Cache the new rules only now that the request has all its lengths.
	if o.rules == nil {
		o.rules = map[overrideKey]*rule{}
	}
	for i, k := range ks {
		if k != (overrideKey{}) && len(o.rules) < maxOverrides && o.rules[k] == nil {
			o.rules[k] = rules[i]
		}
	}
	return 0, true
}
