package rules

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

// Limits on rules, documented in the README.
const (
	// MaxNameLen is the longest rule name, in bytes.
	MaxNameLen = 128
	// MaxPatternLen is the longest client_id or route pattern, in bytes
	// (the longest client_id or route a check may send, too).
	MaxPatternLen = 512
	// MaxLimit is the largest limit of a window or tier.
	MaxLimit = 1 << 40
	// MaxWindow is the longest window: 366 days.
	MaxWindow = 366 * 24 * time.Hour
	// MaxTiers is the most tiers of a layered rule.
	MaxTiers = 16
	// DefaultName is the name of the rule that applies when no stored rule
	// matches; no stored rule may take it.
	DefaultName = "default"
	// MatchName is not a rule's name either: /v1/rules/match is the
	// endpoint that says which rule a request matches, so a rule of that
	// name could not be read, replaced or deleted through the API.
	MatchName = "match"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// Spec is a rule as it is written: the PUT body of /v1/rules/{name}, an
// entry of a rule file (with Name), and what GET returns. Windows are Go
// durations ("60s", "1m", "1h30m"). Either Limit and Window, or Tiers.
type Spec struct {
	Name      string     `json:"name,omitempty" yaml:"name"`
	ClientID  string     `json:"client_id" yaml:"client_id"`
	Route     string     `json:"route" yaml:"route"`
	Algorithm string     `json:"algorithm,omitempty" yaml:"algorithm"`
	Limit     *int64     `json:"limit,omitempty" yaml:"limit"`
	Window    string     `json:"window,omitempty" yaml:"window"`
	Tiers     []TierSpec `json:"tiers,omitempty" yaml:"tiers"`
}

// TierSpec is one tier of a layered rule as written.
type TierSpec struct {
	Limit  *int64 `json:"limit" yaml:"limit"`
	Window string `json:"window" yaml:"window"`
}

// Rule is a validated rule. A Rule is immutable once built and safe for
// concurrent use.
type Rule struct {
	Name      string
	ClientID  string
	Route     string
	Algorithm ratedb.Algorithm
	// Tiers holds the one window of a single-window rule (Layered false)
	// or the tiers of a layered one.
	Tiers   []ratedb.Tier
	Layered bool
	// Generation is the time the rule was created, in Unix microseconds,
	// and grows by one each time the rule's algorithm or windows change (a
	// limit-only change keeps it). It is part of every counted key, so such
	// a change starts new windows, and so does a rule created again under
	// a deleted rule's name. The default rule's is 0.
	Generation int64

	limit *core.Limit
}

// Key returns the counted key of a check of client and route under r:
// "NAME#GENERATION|LEN|CLIENT|ROUTE", where LEN is len(CLIENT) in bytes, so
// that no two (client, route) pairs share a key.
func (r *Rule) Key(client, route string) string {
	return r.Name + "#" + strconv.FormatInt(r.Generation, 10) + "|" + strconv.Itoa(len(client)) + "|" + client + "|" + route
}

// Limit returns the rule's limit for the decision core (the same pointer
// every call, so the core's limiter cache works).
func (r *Rule) Limit() *core.Limit { return r.limit }

// Spec returns the rule as written, with canonical spellings ("fixed",
// "1m0s").
func (r *Rule) Spec() Spec {
	s := Spec{Name: r.Name, ClientID: r.ClientID, Route: r.Route, Algorithm: algName(r.Algorithm)}
	if !r.Layered {
		l := r.Tiers[0].Limit
		s.Limit, s.Window = &l, r.Tiers[0].Scale.String()
		return s
	}
	for _, t := range r.Tiers {
		l := t.Limit
		s.Tiers = append(s.Tiers, TierSpec{Limit: &l, Window: t.Scale.String()})
	}
	return s
}

// sameCounters reports whether r and o count in the same windows (same
// algorithm and windows): a change between them keeps the counts. A layered
// rule's tiers are compared as a set of windows, whatever their order: the
// stores keep the same tiers in any order as one counter.
func (r *Rule) sameCounters(o *Rule) bool {
	if r.Algorithm != o.Algorithm || r.Layered != o.Layered || len(r.Tiers) != len(o.Tiers) {
		return false
	}
	return slices.Equal(sortedScales(r.Tiers), sortedScales(o.Tiers))
}

// sortedScales returns the tiers' windows in ascending order.
func sortedScales(tiers []ratedb.Tier) []time.Duration {
	s := make([]time.Duration, len(tiers))
	for i, t := range tiers {
		s[i] = t.Scale
	}
	slices.Sort(s)
	return s
}

var algorithms = map[string]ratedb.Algorithm{
	"fixed":     ratedb.FixedWindow,
	"per_key":   ratedb.PerKeyWindow,
	"staggered": ratedb.StaggeredWindow,
}

// ParseAlgorithm maps "fixed", "per_key" or "staggered" to a ratedb
// algorithm.
func ParseAlgorithm(s string) (ratedb.Algorithm, error) {
	a, ok := algorithms[s]
	if !ok {
		return 0, fmt.Errorf("algorithm %q is not fixed, per_key or staggered", truncate(s))
	}
	return a, nil
}

func algName(a ratedb.Algorithm) string {
	for n, v := range algorithms {
		if v == a {
			return n
		}
	}
	return a.String()
}

// truncate shortens a user-supplied value quoted in an error.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
