package core

import (
	"context"
	"fmt"

	"github.com/ratedb/ratedb"
)

// Setter is implemented by window limiters that can set a key's count in
// its current window (*ratedb.Window does). The core needs it for refunds
// (Check.Refund); a store whose limiters lack it rejects refunds with
// ErrInvalidCheck. Implementations are safe for concurrent use.
type Setter interface {
	Set(ctx context.Context, key string, count int64) (int64, error)
}

var _ Setter = (*ratedb.Window)(nil)

// setter returns r's limiter as a Setter, nil when it has none.
func (r *resolved) setter() Setter {
	if r.window == nil {
		return nil
	}
	s, _ := r.window.(Setter)
	return s
}

// refund gives ch.Cost back to ch.Key's current window, never below zero,
// and returns the state after it (before is the state the set's peek saw).
// The caller holds ch.Key's stripe exclusively, so no other decision of
// this core counts the key meanwhile. A key without a current window has
// nothing to give back: no window is opened.
//
// The store offers no atomic decrement, so the refund reads the count and
// sets it. If the window ends between the two, the set lands in the next
// window, which nothing else can have counted (the stripe is held): the
// refund then puts that window back to zero. With a store shared by several
// processes a concurrent hit from another process may be lost; refunds are
// exact within one process.
func (c *Core) refund(ctx context.Context, ch Check, r *resolved, before ratedb.Result) (ratedb.Result, error) {
	w, s := r.window, r.setter()
	count, err := w.Get(ctx, ch.Key)
	if err != nil {
		return ratedb.Result{}, err
	}
	if count == 0 {
		return before, nil
	}
	end, err := w.ExpiresAt(ctx, ch.Key)
	if err != nil {
		return ratedb.Result{}, err
	}
	left := max(0, count-ch.Cost)
	if _, err := s.Set(ctx, ch.Key, left); err != nil {
		return ratedb.Result{}, err
	}
	after, err := w.ExpiresAt(ctx, ch.Key)
	if err != nil {
		return ratedb.Result{}, err
	}
	if !after.Equal(end) {
		// The window rolled over between Get and Set.
		if _, err := s.Set(ctx, ch.Key, 0); err != nil {
			return ratedb.Result{}, fmt.Errorf("core: undoing a refund across a window boundary: %w", err)
		}
		left, end = 0, after
	}
	limit := ch.Limit.Tiers[0].Limit
	return ratedb.Result{
		Allowed: true, Count: left, Limit: limit, Remaining: max(0, limit-left),
		ResetAt: end, Scale: ch.Limit.Tiers[0].Scale,
	}, nil
}
