package core

import (
	"context"
	"math"
	"time"

	"github.com/ratedb/ratedb"
)

// peek reads ch's key without counting and reports whether ch's cost (1 for
// a peek of cost 0) fits on top of pending, the cost of earlier checks of
// the same set on the same counters. Count and Remaining are the stored
// state. A key without a current window reports the end of the window a hit
// now would open: exact for FixedWindow, an upper bound (now + scale)
// otherwise.
func (c *Core) peek(ctx context.Context, ch Check, r *resolved, pending int64) (ratedb.Result, error) {
	now := c.opts.Clock()
	need := max(ch.Cost, 1)
	if pending > math.MaxInt64-need {
		need = math.MaxInt64 // saturate: a wrapped sum would read as fitting
	} else {
		need += pending
	}
	if r.window != nil {
		count, end, err := windowState(ctx, r.window, ch.Key)
		if err != nil {
			return ratedb.Result{}, err
		}
		t := ch.Limit.Tiers[0]
		tr := tierState(t, ch.Limit.Algorithm, count, end, need, now)
		res := ratedb.Result{
			Allowed: tr.Fits, Count: tr.Count, Limit: tr.Limit, Remaining: tr.Remaining,
			ResetAt: tr.ResetAt, Scale: tr.Scale,
		}
		if !res.Allowed {
			res.RetryAfter = max(0, tr.ResetAt.Sub(now))
		}
		return res, nil
	}
	counts, ends, err := layeredState(ctx, r.layered, ch.Key)
	if err != nil {
		return ratedb.Result{}, err
	}
	trs := make([]ratedb.TierResult, len(ch.Limit.Tiers))
	allowed := true
	for i, t := range ch.Limit.Tiers {
		var count int64
		var end time.Time
		if i < len(counts) && i < len(ends) {
			count, end = counts[i], ends[i]
		}
		trs[i] = tierState(t, ch.Limit.Algorithm, count, end, need, now)
		allowed = allowed && trs[i].Fits
	}
	bind := bindingTier(trs, allowed)
	b := trs[bind]
	res := ratedb.Result{
		Allowed: allowed, Count: b.Count, Limit: b.Limit, Remaining: b.Remaining,
		ResetAt: b.ResetAt, Scale: b.Scale, Tier: bind, Tiers: trs,
	}
	if !allowed {
		res.RetryAfter = max(0, b.ResetAt.Sub(now))
	}
	return res, nil
}

// WindowStater is implemented by window limiters that read a key's count
// and its window's end in one step (ratedb's and redisstore's Window do). A peek needs
// both from the same window: read with Get, then ExpiresAt, another
// process sharing the store may open the key's next window in between, and
// the peek would report the previous window's count with the next one's
// end (a denial with a reset a whole window away).
type WindowStater interface {
	State(ctx context.Context, key string) (int64, time.Time, error)
}

// LayeredStater is WindowStater for layered limiters (ratedb's and
// redisstore's Layered have it): counts and ends in tier order.
type LayeredStater interface {
	State(ctx context.Context, key string) ([]int64, []time.Time, error)
}

// windowState reads key's count and window end through w, in one step when
// w can.
func windowState(ctx context.Context, w WindowLimiter, key string) (int64, time.Time, error) {
	if s, ok := w.(WindowStater); ok {
		return s.State(ctx, key)
	}
	count, err := w.Get(ctx, key)
	if err != nil {
		return 0, time.Time{}, err
	}
	end, err := w.ExpiresAt(ctx, key)
	return count, end, err
}

// layeredState reads key's counts and window ends through l, in one step
// when l can.
func layeredState(ctx context.Context, l LayeredLimiter, key string) ([]int64, []time.Time, error) {
	if s, ok := l.(LayeredStater); ok {
		return s.State(ctx, key)
	}
	counts, err := l.Get(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	ends, err := l.ExpiresAt(ctx, key)
	return counts, ends, err
}

// tierState is one tier's state for a peek: count in the window ending at
// end (zero: no window), and whether need more fits.
//
// A window the store returned is open by the store's clock, the one its
// hits go by (Redis's TIME, the DB's clock): it is taken as it is, not
// judged again by now, so that a core whose clock runs ahead of the store's
// does not read a full window as one that has ended. now only places the
// window a hit would open when the store has none.
func tierState(t ratedb.Tier, alg ratedb.Algorithm, count int64, end time.Time, need int64, now time.Time) ratedb.TierResult {
	if end.IsZero() {
		count, end = 0, nextEnd(alg, t.Scale, now)
	}
	return ratedb.TierResult{
		Scale: t.Scale, Limit: t.Limit, Count: count, Remaining: max(0, t.Limit-count),
		ResetAt: end, Fits: count <= t.Limit-need,
	}
}

// nextEnd is the end of the window a hit at now would open: the next
// multiple of scale since the epoch for FixedWindow, now+scale otherwise (an
// upper bound for StaggeredWindow, whose offset is private to ratedb).
func nextEnd(alg ratedb.Algorithm, scale time.Duration, now time.Time) time.Time {
	ms := scale.Milliseconds()
	if alg == ratedb.FixedWindow && ms > 0 {
		t := now.UnixMilli()
		return time.UnixMilli(t - t%ms + ms)
	}
	return now.Add(scale)
}

// bindingTier is the tier that binds a layered decision, as every backend
// picks it: ratedb.LayeredResult's rule (on a denial the denying tier that
// frees up last, otherwise the tier with the least room left and, of tiers
// with as little, the one that frees up last), not a copy of it.
func bindingTier(trs []ratedb.TierResult, allowed bool) int {
	return ratedb.LayeredResult(allowed, time.Time{}, trs).Tier
}

// stateAfter is peek, the result of a check of cost 0, moved to the state hit
// reports: the result of a counted hit of the same key and counters earlier
// in the set. The verdict stays the peek's.
func stateAfter(peek, hit ratedb.Result, now time.Time) ratedb.Result {
	if peek.Tiers == nil {
		peek.Count, peek.ResetAt = hit.Count, hit.ResetAt
		peek.Remaining = max(0, peek.Limit-hit.Count)
	} else {
		trs := make([]ratedb.TierResult, len(peek.Tiers))
		for p, tr := range peek.Tiers {
			for _, h := range hit.Tiers {
				if h.Scale == tr.Scale {
					tr.Count, tr.ResetAt, tr.Remaining = h.Count, h.ResetAt, max(0, tr.Limit-h.Count)
				}
			}
			trs[p] = tr
		}
		bind := bindingTier(trs, peek.Allowed)
		b := trs[bind]
		peek.Count, peek.Limit, peek.Remaining, peek.ResetAt, peek.Scale = b.Count, b.Limit, b.Remaining, b.ResetAt, b.Scale
		peek.Tier, peek.Tiers = bind, trs
	}
	if !peek.Allowed {
		peek.RetryAfter = max(0, peek.ResetAt.Sub(now))
	}
	return peek
}
