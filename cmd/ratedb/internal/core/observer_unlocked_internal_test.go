package core

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
)

// lockedBlindWindow's peeks see no window (as when another instance fills
// the key between the peek and the hit), and its undos fail.
type lockedBlindWindow struct{ WindowLimiter }

func (lockedBlindWindow) State(context.Context, string) (int64, time.Time, error) {
	return 0, time.Time{}, nil
}

func (lockedBlindWindow) Undo(context.Context, string, ratedb.Result, int64) error {
	return ratedb.ErrUnavailable
}

type lockedBlindStore struct{ DBStore }

func (s lockedBlindStore) Window(alg ratedb.Algorithm, scale time.Duration) (WindowLimiter, error) {
	w, err := s.DBStore.Window(alg, scale)
	return lockedBlindWindow{w}, err
}

// stripeProbe is an Observer that records, at each call, whether the lock
// stripes of keys are free (TryLock succeeds).
type stripeProbe struct {
	c    *Core
	keys []string
	mu   sync.Mutex
	held []string // "method: key" for each stripe found held
	errs int
}

func (p *stripeProbe) probe(method string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range p.keys {
		mu := &p.c.stripes[p.c.stripe(k)]
		if !mu.TryLock() {
			p.held = append(p.held, method+": "+k)
			continue
		}
		mu.Unlock()
	}
}

func (p *stripeProbe) Checked(string, string, bool) { p.probe("Checked") }
func (p *stripeProbe) WindowOpened(string, string)  { p.probe("WindowOpened") }
func (p *stripeProbe) BoundarySpike(string, string) { p.probe("BoundarySpike") }
func (p *stripeProbe) StoreError(string, string) {
	p.probe("StoreError")
	p.mu.Lock()
	p.errs++
	p.mu.Unlock()
}
func (p *stripeProbe) Decided(time.Duration) { p.probe("Decided") }

// The Observer's methods are called without any core lock held, as its
// documentation says (and the metrics, or any other observer, may take
// their time). The store error of a set that a limit denied and whose
// undo then failed was reported from inside decideSet, while every stripe
// of the set was still locked exclusively.
func TestObserverIsCalledWithoutStripeLocks(t *testing.T) {
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "c.db"), &ratedb.Options{MaxHotKeys: 1000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	p := &stripeProbe{keys: []string{"a", "b"}}
	c := New(lockedBlindStore{DBStore{DB: db}}, Options{Observer: p})
	p.c = c
	la := &Limit{Name: "ra", Algorithm: ratedb.FixedWindow, Tiers: []ratedb.Tier{{Scale: time.Hour, Limit: 5}}}
	lb := &Limit{Name: "rb", Algorithm: ratedb.FixedWindow, Tiers: []ratedb.Tier{{Scale: time.Hour, Limit: 1}}}
	ctx := context.Background()
	d, err := c.Decide(ctx, Check{Limit: lb, Key: "b", Cost: 1})
	require.NoError(t, err)
	require.True(t, d.Allowed, "b's only hit")

	// The peeks see room for both; b's hit is denied, and a's undo fails.
	d, err = c.Decide(ctx, Check{Limit: la, Key: "a", Cost: 1}, Check{Limit: lb, Key: "b", Cost: 1})
	require.NoError(t, err)
	require.False(t, d.Allowed, "b is over its limit")
	require.True(t, d.Results[0].Counted, "a's hit could not be undone")
	assert.Equal(t, 1, p.errs, "the undo's failure is a store error")
	assert.Empty(t, p.held, "stripes held during Observer calls")
}
