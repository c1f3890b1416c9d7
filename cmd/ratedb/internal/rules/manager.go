package rules

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
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
	now   func() time.Time // the clock of new rules' generations
}

// NewManager loads the stored rules from store and serves them under def,
// the default rule.
func NewManager(store Storage, def *Rule) (*Manager, error) {
	stored, err := store.Load()
	if err != nil {
		return nil, err
	}
	byName, invalid, err := buildStored(stored)
	if err != nil {
		return nil, err
	}
	if len(invalid) > 0 {
		return nil, invalidError(invalid)
	}
	m := &Manager{store: store, now: time.Now}
	m.set.Store(newSet(slices.Collect(maps.Values(byName)), def))
	return m, nil
}

// buildStored builds stored rules, by name. A stored rule this version
// cannot build (one written by another version, or edited by hand) is
// returned in invalid, as stored.
func buildStored(stored []Stored) (byName map[string]*Rule, invalid map[string]Stored, err error) {
	byName = make(map[string]*Rule, len(stored))
	for _, s := range stored {
		_, dup := byName[s.Name]
		if _, dupInvalid := invalid[s.Name]; dup || dupInvalid {
			return nil, nil, fmt.Errorf("rules: stored rule %q appears twice", truncate(s.Name))
		}
		r, err := Build(s.Name, s.Spec, false)
		if err != nil {
			if invalid == nil {
				invalid = make(map[string]Stored)
			}
			invalid[s.Name] = s
			continue
		}
		byName[r.Name] = withGeneration(r, s.Generation)
	}
	return byName, invalid, nil
}

// invalidError names the first of the stored rules this version cannot
// build (invalid is not empty) and says why.
func invalidError(invalid map[string]Stored) error {
	name := slices.Sorted(maps.Keys(invalid))[0]
	_, err := Build(name, invalid[name].Spec, false)
	return fmt.Errorf("rules: stored rule %q: %w (replace or delete it with PUT or DELETE /v1/rules/{name} on an instance that runs, or in the storage)", truncate(name), err)
}

// served returns the rules to serve for the stored rules byName and
// invalid: every rule of byName, and for each invalid one the version cur
// serves, if any (the last version of it this process could build), so that
// a rule edited by hand or by another version does not vanish, and the
// instances sharing a storage serve the same rules. A stored rule under a
// reserved name ("default") has no such version: the default rule is not
// one (cur.Get would return it).
func served(byName map[string]*Rule, invalid map[string]Stored, cur *Set) []*Rule {
	out := slices.Collect(maps.Values(byName))
	for name := range invalid {
		if r, ok := cur.byName[name]; ok {
			out = append(out, r)
		}
	}
	return out
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
	return created, m.change(func(byName map[string]*Rule, invalid map[string]Stored) error {
		for i, r := range rs {
			old, ok := byName[r.Name]
			bad, wasInvalid := invalid[r.Name]
			if i == 0 {
				created = !ok && !wasInvalid
			}
			var gen int64
			switch {
			case !ok && !wasInvalid:
				// A new rule's windows are its own: under the name of
				// a deleted rule, it must not find that rule's counts
				// (a deleted rule's last generation is not kept). In
				// microseconds, the deleted rule's generations (its
				// creation plus one a window change, each change a
				// saved transaction) stay below it.
				gen = m.now().UnixMicro()
			case ok:
				gen = old.Generation
				if !old.sameCounters(r) {
					gen++
				}
			case wasInvalid:
				// Its windows cannot be compared: count anew.
				gen = bad.Generation + 1
				delete(invalid, r.Name)
			}
			byName[r.Name] = withGeneration(r, gen)
		}
		return nil
	})
}

// Delete removes the rule called name; ErrNotFound if there is none in
// storage.
func (m *Manager) Delete(name string) error {
	return m.change(func(byName map[string]*Rule, invalid map[string]Stored) error {
		_, ok := byName[name]
		_, bad := invalid[name]
		if !ok && !bad {
			return ErrNotFound
		}
		delete(byName, name)
		delete(invalid, name)
		return nil
	})
}

// change applies edit to the stored rules, by name, saves the result and
// serves it. Stored rules this version cannot build are passed to edit in
// invalid, which it may delete from (a replacement or a deletion); the
// ones it leaves are saved again as they were, and served in the version
// served until then, if any.
func (m *Manager) change(edit func(byName map[string]*Rule, invalid map[string]Stored) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.set.Load()
	var next *Set
	err := m.store.Update(func(stored []Stored) ([]Stored, error) {
		byName, invalid, err := buildStored(stored)
		if err != nil {
			return nil, err
		}
		if err := edit(byName, invalid); err != nil {
			return nil, err
		}
		next = newSet(served(byName, invalid, cur), cur.def)
		out := make([]Stored, 0, len(byName)+len(invalid))
		for _, name := range slices.Sorted(maps.Keys(byName)) {
			r := byName[name]
			out = append(out, Stored{Spec: r.Spec(), Generation: r.Generation})
		}
		for _, name := range slices.Sorted(maps.Keys(invalid)) {
			out = append(out, invalid[name])
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	if next == nil {
		// A Storage whose Update returned without calling edit saved
		// nothing: the served rules stay.
		return errors.New("rules: the storage saved nothing (a change interrupted?); try again")
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
// other processes change too (Redis). If the storage cannot be read, the
// current rules stay and the error is returned. A stored rule this version
// cannot build stays served in its current version, if it has one, while
// every other rule is reloaded, and the error names it.
func (m *Manager) Reload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, err := m.store.Load()
	if err != nil {
		return err
	}
	byName, invalid, err := buildStored(stored)
	if err != nil {
		return err
	}
	cur := m.set.Load()
	m.set.Store(newSet(served(byName, invalid, cur), cur.def))
	if len(invalid) > 0 {
		return invalidError(invalid)
	}
	return nil
}
