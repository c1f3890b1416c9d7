package core

import (
	"context"
	"time"

	"github.com/ratedb/ratedb"
)

// Refunder is implemented by window limiters that can give hits back to a
// key's current window in one step (*ratedb.Window and *redisstore.Window
// do). The core needs it for refunds (Check.Refund); a store whose limiters
// lack it rejects refunds with ErrInvalidCheck. Implementations are safe
// for concurrent use.
type Refunder interface {
	Refund(ctx context.Context, key string, amount int64) (int64, time.Time, error)
}

var _ Refunder = (*ratedb.Window)(nil)

// Undoer is implemented by limiters that can take a hit back from the
// window it counted in (*ratedb.Window and *ratedb.Layered, and redisstore's
// do). The core uses it to undo the hits of a set that a later check of the
// same set denied (see decideSet); with a limiter that lacks it, those hits
// stay counted. Implementations are safe for concurrent use.
type Undoer interface {
	Undo(ctx context.Context, key string, r ratedb.Result, increment int64) error
}

var (
	_ Undoer = (*ratedb.Window)(nil)
	_ Undoer = (*ratedb.Layered)(nil)
)

// undoer returns r's limiter as an Undoer, nil when it has none.
func (r *resolved) undoer() Undoer {
	var l any = r.window
	if r.layered != nil {
		l = r.layered
	}
	u, _ := l.(Undoer)
	return u
}

// refunder returns r's limiter as a Refunder, nil when it has none.
func (r *resolved) refunder() Refunder {
	if r.window == nil {
		return nil
	}
	f, _ := r.window.(Refunder)
	return f
}

// refund gives ch.Cost back to ch.Key's current window, never below zero,
// and returns the state after it. A key without a current window (none
// when the set's peek looked, or one that ended since) has nothing to give
// back: no window is opened, and the answer is the key's state now, as a
// peek reports a key without a window.
//
// The store applies the refund in one step, so a hit on the key from
// another decision, another core or another process sharing the store is
// counted before or after it, never lost.
func (c *Core) refund(ctx context.Context, ch Check, r *resolved) (ratedb.Result, error) {
	left, end, err := r.refunder().Refund(ctx, ch.Key, ch.Cost)
	if err != nil {
		return ratedb.Result{}, err
	}
	if end.IsZero() {
		tr := tierState(ch.Limit.Tiers[0], ch.Limit.Algorithm, 0, time.Time{}, 1, c.opts.Clock())
		return ratedb.Result{
			Allowed: true, Count: 0, Limit: tr.Limit, Remaining: tr.Remaining,
			ResetAt: tr.ResetAt, Scale: tr.Scale,
		}, nil
	}
	limit := ch.Limit.Tiers[0].Limit
	return ratedb.Result{
		Allowed: true, Count: left, Limit: limit, Remaining: max(0, limit-left),
		ResetAt: end, Scale: ch.Limit.Tiers[0].Scale,
	}, nil
}
