package rules

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

// Build validates spec under name and returns the rule. Every problem is
// reported at once, in a *ValidationError wrapping ErrInvalidRule; of more
// than MaxTiers tiers, only the first MaxTiers are checked. An empty
// algorithm means "fixed". The name "default" is reserved unless
// allowDefault (used for the default rule built from flags).
func Build(name string, spec Spec, allowDefault bool) (*Rule, error) {
	var p problems
	switch {
	case name == "":
		p.add("name is empty")
	case len(name) > MaxNameLen:
		p.add("name is longer than %d bytes", MaxNameLen)
	case !nameRE.MatchString(name):
		p.add("name %q may only hold letters, digits, '.', '_', ':' and '-', and must start with a letter or digit", truncate(name))
	case name == DefaultName && !allowDefault:
		p.add("name %q is reserved for the default rule (set it with --default-* flags)", DefaultName)
	case name == MatchName:
		p.add("name %q is reserved: /v1/rules/%s is the endpoint that says which rule a request matches", MatchName, MatchName)
	}
	checkPattern(&p, "client_id", spec.ClientID)
	checkPattern(&p, "route", spec.Route)
	r := &Rule{Name: name, ClientID: spec.ClientID, Route: spec.Route, Algorithm: ratedb.FixedWindow}
	if spec.Algorithm != "" {
		a, err := ParseAlgorithm(spec.Algorithm)
		if err != nil {
			p.add("%v", err)
		}
		r.Algorithm = a
	}
	switch {
	case len(spec.Tiers) > 0 && (spec.Limit != nil || spec.Window != ""):
		p.add("give either limit and window, or tiers, not both")
	case len(spec.Tiers) > 0:
		r.Layered = true
		tiers := spec.Tiers
		if len(tiers) > MaxTiers {
			// Only the first MaxTiers are checked: a body of thousands of
			// tiers would otherwise be answered with thousands of problems.
			p.add("%d tiers, at most %d (only the first %d are checked)", len(tiers), MaxTiers, MaxTiers)
			tiers = tiers[:MaxTiers]
		}
		seen := map[time.Duration]int{}
		for i, t := range tiers {
			tier := checkWindow(&p, fmt.Sprintf("tiers[%d].", i), t.Limit, t.Window)
			if j, dup := seen[tier.Scale]; dup && tier.Scale > 0 {
				p.add("tiers[%d].window repeats tiers[%d].window", i, j)
			}
			seen[tier.Scale] = i
			r.Tiers = append(r.Tiers, tier)
		}
	default:
		r.Tiers = []ratedb.Tier{checkWindow(&p, "", spec.Limit, spec.Window)}
	}
	if len(p) > 0 {
		return nil, &ValidationError{Problems: p}
	}
	r.limit = newLimit(r)
	return r, nil
}

// newLimit is r's limit for the decision core.
func newLimit(r *Rule) *core.Limit {
	return &core.Limit{Name: r.Name, API: core.APIHTTP, Algorithm: r.Algorithm, Tiers: r.Tiers, Layered: r.Layered}
}

type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func checkPattern(p *problems, field, pattern string) {
	switch {
	case pattern == "":
		p.add("%s is empty (use \"*\" for any)", field)
	case len(pattern) > MaxPatternLen:
		p.add("%s is longer than %d bytes", field, MaxPatternLen)
	case strings.ContainsRune(pattern, utf8.RuneError):
		// The check API refuses U+FFFD (and bytes that are not UTF-8) in
		// a request, so a pattern holding it could never match.
		p.add("%s holds U+FFFD or a byte that is not UTF-8, which no request can carry", field)
	}
}

// checkWindow validates one limit and window (prefix names the tier).
func checkWindow(p *problems, prefix string, limit *int64, window string) ratedb.Tier {
	var t ratedb.Tier
	switch {
	case limit == nil:
		p.add("%slimit is missing", prefix)
	case *limit < 0 || *limit > MaxLimit:
		p.add("%slimit %d is not between 0 and %d", prefix, *limit, int64(MaxLimit))
	default:
		t.Limit = *limit
	}
	if window == "" {
		p.add("%swindow is missing (a duration such as \"60s\")", prefix)
		return t
	}
	d, err := time.ParseDuration(window)
	switch {
	case err != nil:
		p.add("%swindow %q is not a duration such as \"60s\" or \"1h\"", prefix, truncate(window))
	case d < time.Millisecond || d > MaxWindow:
		p.add("%swindow %s is not between 1ms and %s", prefix, d, MaxWindow)
	case d%time.Millisecond != 0:
		p.add("%swindow %s is not a whole number of milliseconds", prefix, d)
	default:
		t.Scale = d
	}
	return t
}
