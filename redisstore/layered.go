package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/limits"
)

// Layered limits a key by several windows at once in Redis, as
// *ratedb.Layered does in the embedded DB, with the same answers: a hit is
// allowed only if every tier has room for it, and then every tier counts
// it; a denied hit changes no tier. All tiers of a key live in one Redis key
// and one script decides and updates them, so the all-or-nothing rule holds
// across processes. Layered limiters with the same algorithm and the same
// scales, each as many times, share counters, whatever their limits and the
// order of their tiers, as in the embedded DB: (1m, 1h) and (1h, 1m) do,
// (1m) and (1m, 1m) do not.
//
// A Layered is safe for concurrent use; it is an httplimit.Rater. Every
// method returns an error matching ratedb.ErrUnavailable, and no decision,
// when Redis does not answer within Options.Timeout.
type Layered struct {
	sp    *spec
	tiers []ratedb.Tier
	pos   []int // pos[i]: where tier i (in the order given) is stored, by ascending scale
}

// Layered returns a limiter over the given tiers: at least one and at most
// 16, each with a scale of at least one millisecond (a whole number of
// milliseconds) and a limit >= 0. Tiers need not be ordered; results report
// them in the order given. Errors match ratedb.ErrInvalidArgument.
func (s *Store) Layered(alg ratedb.Algorithm, tiers ...ratedb.Tier) (*Layered, error) {
	if err := limits.Algorithm(int(alg)); err != nil {
		return nil, err
	}
	given, err := limits.Tiers(len(tiers), func(i int) (time.Duration, int64) { return tiers[i].Scale, tiers[i].Limit })
	if err != nil {
		return nil, err
	}
	pos, scales := limits.SortScales(given)
	return &Layered{sp: s.newSpec(alg, scales, true), tiers: append([]ratedb.Tier(nil), tiers...), pos: pos}, nil
}

// limits returns the tiers' limits, in stored order (by ascending scale).
func (l *Layered) limits() []int64 {
	lims := make([]int64, len(l.tiers))
	for i, t := range l.tiers {
		lims[l.pos[i]] = t.Limit
	}
	return lims
}

// Tiers returns a copy of the tiers, in the order given.
func (l *Layered) Tiers() []ratedb.Tier { return append([]ratedb.Tier(nil), l.tiers...) }

// Algorithm returns the limiter's algorithm.
func (l *Layered) Algorithm() ratedb.Algorithm { return l.sp.alg }

// Hit counts increment (> 0) against key in every tier if every tier has
// room for it, and reports the decision. Result.Tiers holds every tier's
// state after the call; the top-level Count, Limit, Remaining, ResetAt and
// Scale are those of Result.Tier, the tier that bound the decision: on a
// denial, the denying tier that frees up last (RetryAfter is the time until
// every denying tier has started a new window); when allowed, the tier with
// the least room left and, of tiers with as little, the one that frees up
// last (see ratedb.LayeredResult).
func (l *Layered) Hit(ctx context.Context, key string, increment int64) (ratedb.Result, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return ratedb.Result{}, err
	}
	if increment <= 0 {
		return ratedb.Result{}, fmt.Errorf("%w: increment %d is not positive", ratedb.ErrInvalidArgument, increment)
	}
	allowed, now, ts, err := l.sp.count(ctx, key, true, increment, l.limits(), l.pos)
	if err != nil {
		return ratedb.Result{}, err
	}
	trs := make([]ratedb.TierResult, len(l.tiers))
	for i, t := range l.tiers {
		st := ts[l.pos[i]]
		trs[i] = ratedb.TierResult{
			Scale:     t.Scale,
			Limit:     t.Limit,
			Count:     st.count,
			Remaining: max(0, t.Limit-st.count),
			ResetAt:   time.UnixMilli(st.end),
			Fits:      st.fits,
		}
	}
	return ratedb.LayeredResult(allowed, time.UnixMilli(now), trs), nil
}

// Inc adds increment (> 0) to key in every tier without a limit check and
// returns the new counts, in tier order. A count past MaxCount is refused
// with ratedb.ErrInvalidArgument and changes nothing.
func (l *Layered) Inc(ctx context.Context, key string, increment int64) ([]int64, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return nil, err
	}
	if increment <= 0 {
		return nil, fmt.Errorf("%w: increment %d is not positive", ratedb.ErrInvalidArgument, increment)
	}
	if increment > MaxCount {
		return nil, fmt.Errorf("%w: increment %d would overflow tier 0's count", ratedb.ErrInvalidArgument, increment)
	}
	_, _, ts, err := l.sp.count(ctx, key, false, increment, nil, l.pos)
	if err != nil {
		return nil, err
	}
	return l.counts(ts), nil
}

// Refund gives amount (> 0) back to key's current window in every tier:
// each tier's count drops by amount, never below zero, and no window's end
// moves. It returns the counts after the refund, in tier order; a tier with
// no current window gets nothing back and reads 0. A key with no current
// window in any tier has nothing to give back: Refund opens none.
//
// A refund is one script, so it is one step with respect to every other
// call on the key from any process: a hit that races it is never lost. It
// is sent at most once: after a network error its effect is unknown, and it
// is not retried, since a refund applied twice would give back twice (the
// error means the refund may not have happened; the counts are then too
// high, never too low).
func (l *Layered) Refund(ctx context.Context, key string, amount int64) ([]int64, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return nil, err
	}
	if amount <= 0 {
		return nil, fmt.Errorf("%w: amount %d is not positive", ratedb.ErrInvalidArgument, amount)
	}
	ts, err := l.sp.refund(ctx, key, amount)
	if err != nil {
		return nil, err
	}
	return l.counts(ts), nil
}

// Undo takes back an allowed Hit of increment (> 0) on key whose Result is
// r: in every tier whose window is still the one the hit counted in (it
// still ends at that tier's r.Tiers[i].ResetAt), the count drops by
// increment, never below zero. A tier whose window has ended since, or
// whose end was cut after time went back (see the package doc), is left
// alone: an undo never gives back room the hit did not take. A denied r
// counted nothing, and Undo does nothing. Undo opens no window.
//
// A window is known by its end. After a Reset, the first hit opens a window
// that, with FixedWindow and StaggeredWindow, ends when the cleared one
// did: an Undo of a hit made before the Reset then takes from that new
// window. Do not undo across a Reset. The same holds after time went back
// and the hit's windows were cut short: a window opened once a cut one has
// ended may end when the hit's did, and an Undo takes from it.
//
// An undo is one script, one step with respect to every other call on the
// key from any process. Like a refund it is sent at most once: after a
// network error the hit may still be counted (too high, never too low).
func (l *Layered) Undo(ctx context.Context, key string, r ratedb.Result, increment int64) error {
	if err := limits.CheckCall(ctx, key); err != nil {
		return err
	}
	if increment <= 0 {
		return fmt.Errorf("%w: increment %d is not positive", ratedb.ErrInvalidArgument, increment)
	}
	if len(r.Tiers) != len(l.tiers) {
		return fmt.Errorf("%w: not the Result of a hit of this Layered limiter (%d tiers, want %d)", ratedb.ErrInvalidArgument, len(r.Tiers), len(l.tiers))
	}
	for i, t := range r.Tiers {
		if t.Scale != l.tiers[i].Scale || (r.Allowed && t.ResetAt.IsZero()) {
			return fmt.Errorf("%w: not the Result of a hit of this Layered limiter (tier %d)", ratedb.ErrInvalidArgument, i)
		}
	}
	if !r.Allowed {
		return nil
	}
	ends := make([]int64, len(l.tiers))
	for i, t := range r.Tiers {
		ends[l.pos[i]] = t.ResetAt.UnixMilli()
	}
	_, err := l.sp.refund(ctx, key, increment, ends...)
	return err
}

// counts returns the count of each tier of ts (in storage order), in the
// order the tiers were given.
func (l *Layered) counts(ts []tierState) []int64 {
	out := make([]int64, len(ts))
	for i, p := range l.pos {
		out[i] = ts[p].count
	}
	return out
}

// Get returns key's count in each tier's current window (0 for a tier with
// none), in tier order. It opens no window.
func (l *Layered) Get(ctx context.Context, key string) ([]int64, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return nil, err
	}
	ts, err := l.sp.read(ctx, key)
	if err != nil {
		return nil, err
	}
	return l.counts(ts), nil
}

// ExpiresAt returns the end of each tier's current window for key (the zero
// Time for a tier with none), in tier order.
func (l *Layered) ExpiresAt(ctx context.Context, key string) ([]time.Time, error) {
	_, ends, err := l.State(ctx, key)
	return ends, err
}

// State returns each tier's count in its current window and that window's
// end (0 and the zero Time for a tier with none), in tier order, read in
// one step: unlike Get and ExpiresAt called one after the other, they
// always describe the same windows, even when another process opens a
// tier's next window meanwhile. It opens no window.
func (l *Layered) State(ctx context.Context, key string) ([]int64, []time.Time, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return nil, nil, err
	}
	ts, err := l.sp.read(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	ends := make([]time.Time, len(ts))
	for i, p := range l.pos {
		if end := ts[p].end; end != 0 {
			ends[i] = time.UnixMilli(end)
		}
	}
	return l.counts(ts), ends, nil
}

// Reset forgets key's windows in every tier.
func (l *Layered) Reset(ctx context.Context, key string) error {
	if err := limits.CheckCall(ctx, key); err != nil {
		return err
	}
	return l.sp.reset(ctx, key)
}
