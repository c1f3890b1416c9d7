package rules

import (
	"cmp"
	"fmt"
	"slices"
)

// Set is an immutable set of rules plus the default rule, indexed for
// matching. It is safe for concurrent use.
type Set struct {
	byName map[string]*Rule
	exact  map[exactKey]*Rule
	wild   []*Rule // in precedence order
	def    *Rule
}

type exactKey struct{ client, route string }

// newSet indexes rules (distinct names) under the default rule def.
func newSet(rules []*Rule, def *Rule) *Set {
	s := &Set{byName: make(map[string]*Rule, len(rules)), exact: make(map[exactKey]*Rule), def: def}
	for _, r := range rules {
		s.byName[r.Name] = r
		if isExact(r.ClientID) && isExact(r.Route) {
			k := exactKey{r.ClientID, r.Route}
			if old, ok := s.exact[k]; !ok || r.Name < old.Name {
				s.exact[k] = r
			}
			continue
		}
		s.wild = append(s.wild, r)
	}
	slices.SortFunc(s.wild, compareWild)
	return s
}

// compareWild orders wildcard rules by precedence: more literal characters
// in client_id first, then more in route, then by name.
func compareWild(a, b *Rule) int {
	if c := cmp.Compare(literals(b.ClientID), literals(a.ClientID)); c != 0 {
		return c
	}
	if c := cmp.Compare(literals(b.Route), literals(a.Route)); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// Match returns the rule that applies to a check of client and route, and
// why. The precedence, first applicable row wins:
//
//  1. an exact rule: client_id and route without '*', both equal to the
//     request's (ties: the smallest name);
//  2. among wildcard rules that match both fields: the most literal
//     (non-'*') characters in client_id, then the most in route, then the
//     smallest name;
//  3. the default rule.
func (s *Set) Match(client, route string) (r *Rule, reason string) {
	if r, ok := s.exact[exactKey{client, route}]; ok {
		return r, "exact rule: its client_id and route equal the request's"
	}
	for _, r := range s.wild {
		if matchPattern(r.ClientID, client) && matchPattern(r.Route, route) {
			return r, fmt.Sprintf("wildcard rule: the most specific that matches (%d literal characters in client_id, %d in route; then by name)",
				literals(r.ClientID), literals(r.Route))
		}
	}
	return s.def, "no rule matched: the default rule applies"
}

// Rules returns the stored rules (not the default), sorted by name.
func (s *Set) Rules() []*Rule {
	out := make([]*Rule, 0, len(s.byName))
	for _, r := range s.byName {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *Rule) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Get returns the stored rule called name, or the default rule for
// "default".
func (s *Set) Get(name string) (*Rule, bool) {
	if name == DefaultName {
		return s.def, true
	}
	r, ok := s.byName[name]
	return r, ok
}

// Default returns the default rule.
func (s *Set) Default() *Rule { return s.def }
