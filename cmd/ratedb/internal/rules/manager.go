package rules

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// Manager holds the current rule set and changes it: every change is saved
// to its Storage before it is published, and applies to the next Match.
// Changes apply to the stored rules (see Import).
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
	byName, err := buildStored(stored)
	if err != nil {
		return nil, err
	}
	m := &Manager{store: store}
	m.set.Store(newSet(slices.Collect(maps.Values(byName)), def))
	return m, nil
}

// buildStored builds stored rules, by name.
func buildStored(stored []Stored) (map[string]*Rule, error) {
	byName := make(map[string]*Rule, len(stored))
	for _, s := range stored {
		r, err := Build(s.Name, s.Spec, false)
		if err != nil {
			return nil, fmt.Errorf("rules: stored rule %q: %w", truncate(s.Name), err)
		}
		if _, dup := byName[r.Name]; dup {
			return nil, fmt.Errorf("rules: stored rule %q appears twice", truncate(s.Name))
		}
		byName[r.Name] = withGeneration(r, s.Generation)
	}
	return byName, nil
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
//
// A change applies to the rules in storage, read again for it, not to the
// copy this Manager serves: with a storage that other processes change too
// (Redis), a rule another instance stored since this one last reloaded is
// kept, and two instances changing rules at once both keep their change
// (Storage.Update).
func (m *Manager) Import(rs []*Rule) (created bool, err error) {
	return created, m.change(func(byName map[string]*Rule) error {
		for i, r := range rs {
			old, ok := byName[r.Name]
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
			byName[r.Name] = withGeneration(r, gen)
		}
		return nil
	})
}

// Delete removes the rule called name; ErrNotFound if there is none in
// storage.
func (m *Manager) Delete(name string) error {
	return m.change(func(byName map[string]*Rule) error {
		if _, ok := byName[name]; !ok {
			return ErrNotFound
		}
		delete(byName, name)
		return nil
	})
}

// change applies edit to the stored rules, by name, saves the result and
// serves it.
func (m *Manager) change(edit func(byName map[string]*Rule) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	def := m.set.Load().def
	var next *Set
	err := m.store.Update(func(stored []Stored) ([]Stored, error) {
		byName, err := buildStored(stored)
		if err != nil {
			return nil, err
		}
		if err := edit(byName); err != nil {
			return nil, err
		}
		next = newSet(slices.Collect(maps.Values(byName)), def)
		out := make([]Stored, 0, len(byName))
		for _, r := range next.Rules() {
			out = append(out, Stored{Spec: r.Spec(), Generation: r.Generation})
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	m.set.Store(next)
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
