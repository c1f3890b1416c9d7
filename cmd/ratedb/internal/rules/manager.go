package rules

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Manager holds the current rule set and changes it: every change is saved
// to its Storage before it is published, and applies to the next Match.
// Reads (Current, Match) are lock-free; changes are serialized. It is safe
// for concurrent use.
type Manager struct {
	mu    sync.Mutex // serializes changes
	set   atomic.Pointer[Set]
	store Storage
}

// NewManager loads the stored rules from store and serves them under def,
// the default rule.
func NewManager(store Storage, def *Rule) (*Manager, error) {
	stored, err := store.Load()
	if err != nil {
		return nil, err
	}
	rs := make([]*Rule, 0, len(stored))
	seen := map[string]bool{}
	for _, s := range stored {
		r, err := Build(s.Name, s.Spec, false)
		if err != nil {
			return nil, fmt.Errorf("rules: stored rule %q: %w", truncate(s.Name), err)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("rules: stored rule %q appears twice", truncate(s.Name))
		}
		seen[r.Name] = true
		r = withGeneration(r, s.Generation)
		rs = append(rs, r)
	}
	m := &Manager{store: store}
	m.set.Store(newSet(rs, def))
	return m, nil
}

// Current returns the current rule set.
func (m *Manager) Current() *Set { return m.set.Load() }

// Put stores r (replacing the rule of the same name) and reports whether it
// was created. A replacement with the same algorithm and windows keeps the
// counts; otherwise its generation grows and new windows start.
func (m *Manager) Put(r *Rule) (created bool, err error) {
	return m.Import([]*Rule{r})
}

// Import stores every rule of rs (distinct names), replacing stored rules of
// the same names, in one save. It reports whether the first rule was
// created.
func (m *Manager) Import(rs []*Rule) (created bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.set.Load()
	next := make(map[string]*Rule, len(cur.byName)+len(rs))
	for n, r := range cur.byName {
		next[n] = r
	}
	for i, r := range rs {
		old, ok := next[r.Name]
		if i == 0 {
			created = !ok
		}
		gen := int64(0)
		if ok {
			gen = old.Generation
			if !old.sameCounters(r) {
				gen++
			}
		}
		next[r.Name] = withGeneration(r, gen)
	}
	return created, m.publish(cur, next)
}

// Delete removes the rule called name; ErrNotFound if there is none.
func (m *Manager) Delete(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.set.Load()
	if _, ok := cur.byName[name]; !ok {
		return ErrNotFound
	}
	next := make(map[string]*Rule, len(cur.byName))
	for n, r := range cur.byName {
		if n != name {
			next[n] = r
		}
	}
	return m.publish(cur, next)
}

// publish saves next and makes it current. m.mu held.
func (m *Manager) publish(cur *Set, next map[string]*Rule) error {
	rs := make([]*Rule, 0, len(next))
	for _, r := range next {
		rs = append(rs, r)
	}
	s := newSet(rs, cur.def)
	stored := make([]Stored, 0, len(rs))
	for _, r := range s.Rules() {
		sp := r.Spec()
		stored = append(stored, Stored{Spec: sp, Generation: r.Generation})
	}
	if err := m.store.Save(stored); err != nil {
		return err
	}
	m.set.Store(s)
	return nil
}

// withGeneration returns a copy of r with generation gen and its own limit.
func withGeneration(r *Rule, gen int64) *Rule {
	c := *r
	c.Generation = gen
	c.limit = newLimit(&c)
	return &c
}

// Reload replaces the current rules with the stored ones, for a storage
// other processes change too (Redis). Rules whose storage is unreadable or
// invalid are kept as they are and the error is returned.
func (m *Manager) Reload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.set.Load()
	fresh, err := NewManager(m.store, cur.def)
	if err != nil {
		return err
	}
	m.set.Store(fresh.set.Load())
	return nil
}
