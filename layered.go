package ratedb

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ratedb/ratedb/internal/limits"
)

// Tier is one window of a Layered limiter: at most Limit hits per Scale.
type Tier struct {
	// Scale is the tier's window length: at least one millisecond, and a
	// whole number of milliseconds.
	Scale time.Duration
	// Limit is the most the tier's window counts, >= 0 (0 denies every
	// hit).
	Limit int64
}

// Layered limits a key by several windows at once, for example 1 per
// minute, 3 per 15 minutes, 10 per hour and 20 per day. A hit is allowed
// only if every tier has room for it, and then every tier counts it; a denied
// hit changes no tier. The decision and the update happen under one lock, so
// there are neither phantom counts in shorter tiers after a longer tier
// denies nor false denials under concurrency.
//
// All tiers share the algorithm given to DB.Layered; each tier has its own
// window (for PerKeyWindow, each tier's window starts at the first hit that
// tier counts). The tiers are persisted, spilled and reloaded together as one
// record, and the janitor removes a key only when all its tiers have expired.
// Layered limiters of a DB with the same algorithm and the same scales, each
// as many times, share counters, whatever their limits and whatever the
// order the tiers are given in: (1m, 1h) and (1h, 1m) count the same
// windows; (1m, 1m), a scale given twice, counts its own. A Window shares
// no counter with a Layered limiter, not even a one-tier one of its scale,
// and tiers that gain, lose or change a scale make another limiter, whose
// windows start empty (the janitor removes the old ones once they end).
//
// A Layered is safe for concurrent use.
type Layered struct {
	*spec
	tiers    []Tier
	pos      []int // pos[i] is the spec's tier (scales sorted) that holds tier i as given
	minLimit int64 // the least Limit of tiers: a hit of a larger increment is denied whatever the key's state
}

// Layered returns a limiter over the given tiers: at least one and at most
// 16, each with a scale of at least one millisecond (a whole number of
// milliseconds) and a limit >= 0. Tiers need not be ordered; results report
// them in the order given.
func (db *DB) Layered(alg Algorithm, tiers ...Tier) (*Layered, error) {
	if db.closing.Load() {
		return nil, ErrClosed // whatever the arguments: see ErrClosed
	}
	if err := limits.Algorithm(int(alg)); err != nil {
		return nil, err
	}
	given, err := limits.Tiers(len(tiers), func(i int) (time.Duration, int64) { return tiers[i].Scale, tiers[i].Limit })
	if err != nil {
		return nil, err
	}
	pos, scales := limits.SortScales(given)
	s, err := db.specFor(alg, scales, true)
	if err != nil {
		return nil, err
	}
	l := &Layered{spec: s, tiers: append([]Tier(nil), tiers...), pos: pos, minLimit: tiers[0].Limit}
	for _, t := range tiers {
		l.minLimit = min(l.minLimit, t.Limit)
	}
	return l, nil
}

// Tiers returns a copy of the tiers, in the order given.
func (l *Layered) Tiers() []Tier { return append([]Tier(nil), l.tiers...) }

// Algorithm returns the limiter's algorithm.
func (l *Layered) Algorithm() Algorithm { return l.alg }

// Hit counts increment (> 0) against key in every tier if every tier has
// room for it, and reports the decision. Result.Tiers holds every tier's
// state after the call; the top-level Count, Limit, Remaining, ResetAt and
// Scale are those of Result.Tier, the tier that bound the decision: on a
// denial, the denying tier that frees up last (RetryAfter is the time until
// every denying tier has started a new window); when allowed, the tier with
// the least room left and, of tiers with as little, the one that frees up
// last. A hit whose increment exceeds a tier's limit, on a
// key with no open window in any tier, does not bring the key into memory.
func (l *Layered) Hit(ctx context.Context, key string, increment int64) (Result, error) {
	if err := l.db.checkCall(ctx, key); err != nil {
		return Result{}, err
	}
	if increment <= 0 {
		return Result{}, fmt.Errorf("%w: increment %d is not positive", ErrInvalidArgument, increment)
	}
	db := l.db
	h := l.hash(key)
	if !db.enter(h) {
		return Result{}, ErrClosed
	}
	if increment > l.minLimit {
		r, ok, err := l.deniedOutright(key, h, increment)
		if err != nil {
			db.exit(h)
			return Result{}, err
		}
		if ok {
			db.exitHit(h, false)
			return r, nil
		}
	}
	e, now, cold, err := l.acquire(key, h)
	if err != nil {
		db.exit(h)
		return Result{}, err
	}
	l.capEnds(e, h, now)
	trs := make([]TierResult, len(l.tiers))
	allowed := true
	for i, t := range l.tiers {
		count, end := l.current(e.tier(l.pos[i]), l.pos[i], key, now)
		fits := count <= t.Limit-increment
		allowed = allowed && fits
		trs[i] = TierResult{Scale: t.Scale, Limit: t.Limit, Count: count, ResetAt: time.UnixMilli(end), Fits: fits}
	}
	if allowed {
		for i := range trs {
			c := e.tier(l.pos[i])
			trs[i].Count += increment
			c.Count, c.End = trs[i].Count, trs[i].ResetAt.UnixMilli()
		}
		db.markDirty(e, h)
	}
	l.release(e, cold)
	db.exitHit(h, allowed)

	for i := range trs {
		trs[i].Remaining = max(0, trs[i].Limit-trs[i].Count)
	}
	return LayeredResult(allowed, time.UnixMilli(now), trs), nil
}

// deniedOutright answers a Hit whose increment exceeds a tier's limit,
// which is denied whatever key's state, if key has no open window in any
// tier: from a read, as Hit would (every tier at count 0, with the window a
// hit at now would open), without bringing key into memory (see
// Window.deniedOutright). ok is false if key has an open window: Hit then
// takes its usual path.
func (l *Layered) deniedOutright(key string, h uint64, increment int64) (r Result, ok bool, err error) {
	var buf [maxTiersInline]counter
	cs, now, err := l.peek(key, h, buf[:0])
	if err != nil {
		return Result{}, false, err
	}
	for _, c := range cs {
		if c.End > now {
			return Result{}, false, nil
		}
	}
	trs := make([]TierResult, len(l.tiers))
	for i, t := range l.tiers {
		_, end := l.current(&counter{}, l.pos[i], key, now)
		trs[i] = TierResult{Scale: t.Scale, Limit: t.Limit, Remaining: t.Limit, ResetAt: time.UnixMilli(end), Fits: increment <= t.Limit}
	}
	return LayeredResult(false, time.UnixMilli(now), trs), true, nil
}

// LayeredResult builds the Result of a Layered hit from every tier's state
// after the call (Remaining filled in), in the order the tiers were given:
// it picks Result.Tier, the tier that bound the decision (on a denial the
// denying tier that frees up last, otherwise the tier with the least room
// left and, of tiers with as little, the one that frees up last; remaining
// ties go to the earlier tier), copies that tier's figures to the top
// level and, on a denial, sets RetryAfter to the time from now until that
// tier's window ends. Every backend (the embedded DB, redisstore) answers
// through it, so they agree on the binding tier. tiers must not be empty;
// the Result keeps the slice.
func LayeredResult(allowed bool, now time.Time, tiers []TierResult) Result {
	bind := 0
	for i := range tiers {
		if allowed {
			if tiers[i].Remaining < tiers[bind].Remaining ||
				tiers[i].Remaining == tiers[bind].Remaining && tiers[i].ResetAt.After(tiers[bind].ResetAt) {
				bind = i
			}
		} else if !tiers[i].Fits && (tiers[bind].Fits || tiers[i].ResetAt.After(tiers[bind].ResetAt)) {
			bind = i
		}
	}
	b := tiers[bind]
	r := Result{
		Allowed:   allowed,
		Count:     b.Count,
		Limit:     b.Limit,
		Remaining: b.Remaining,
		ResetAt:   b.ResetAt,
		Scale:     b.Scale,
		Tier:      bind,
		Tiers:     tiers,
	}
	if !allowed {
		r.RetryAfter = time.Duration(b.ResetAt.UnixMilli()-now.UnixMilli()) * time.Millisecond
	}
	return r
}

// Inc adds increment (> 0) to key in every tier without a limit check and
// returns the new counts, in tier order. An increment that would take a
// tier's count past 1<<63-1 is refused with ErrInvalidArgument and changes
// no tier.
func (l *Layered) Inc(ctx context.Context, key string, increment int64) ([]int64, error) {
	if err := l.db.checkCall(ctx, key); err != nil {
		return nil, err
	}
	if increment <= 0 {
		return nil, fmt.Errorf("%w: increment %d is not positive", ErrInvalidArgument, increment)
	}
	counts := make([]int64, len(l.tiers))
	ends := make([]int64, len(l.tiers))
	err := l.mutate(key, func(e *entry, now int64) (bool, error) {
		for i := range l.tiers {
			count, end := l.current(e.tier(l.pos[i]), l.pos[i], key, now)
			if count > maxCount-increment {
				return false, fmt.Errorf("%w: increment %d would overflow tier %d's count", ErrInvalidArgument, increment, i)
			}
			counts[i], ends[i] = count+increment, end
		}
		for i := range counts {
			*e.tier(l.pos[i]) = counter{Count: counts[i], End: ends[i]}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// Refund gives amount (> 0) back to key's current window in every tier:
// each tier's count drops by amount, never below zero, and no window's end
// moves. It returns the counts after the refund, in tier order; a tier with
// no current window gets nothing back and reads 0. A key with no current
// window in any tier has nothing to give back: Refund opens none.
//
// A refund is one step with respect to every other call on the key: a hit
// that races it is counted before it or after it, never lost. Use it to
// give back a hit for work that did not happen (a login that succeeded,
// when only failures should count).
func (l *Layered) Refund(ctx context.Context, key string, amount int64) ([]int64, error) {
	if err := l.db.checkCall(ctx, key); err != nil {
		return nil, err
	}
	if amount <= 0 {
		return nil, fmt.Errorf("%w: amount %d is not positive", ErrInvalidArgument, amount)
	}
	counts := make([]int64, len(l.tiers))
	// A key with no window anywhere gets no entry: look before locking one.
	cs, now, err := l.read(ctx, key)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(cs, func(c counter) bool { return c.End > now }) {
		return counts, nil
	}
	err = l.mutate(key, func(e *entry, now int64) (bool, error) {
		changed := false
		for i := range l.tiers {
			c := e.tier(l.pos[i])
			if c.End <= now {
				continue // ended since the read, or never opened: nothing to give back
			}
			if c.Count > 0 {
				c.Count = max(0, c.Count-amount)
				changed = true
			}
			counts[i] = c.Count
		}
		return changed, nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// Undo takes back an allowed Hit of increment (> 0) on key whose Result is
// r: in every tier whose window is still the one the hit counted in (it
// still ends at that tier's r.Tiers[i].ResetAt), the count drops by
// increment, never below zero. A tier whose window has ended since, or
// whose end the clock model moved, is left alone: an undo never gives back
// room the hit did not take. A denied r counted nothing, and Undo does
// nothing. Undo opens no window.
//
// A window is known by its end. After a Reset, the first hit opens a window
// that, with FixedWindow and StaggeredWindow, ends when the cleared one
// did: an Undo of a hit made before the Reset then takes from that new
// window. Do not undo across a Reset. The same holds after the clock went
// back and the clock model cut the hit's windows short: a window opened once
// a cut one has ended may end when the hit's did, and an Undo takes from
// it. With the default clock, time goes back only across a restart, which
// no Result outlives.
//
// Like Refund, an undo is one step with respect to every other call on the
// key.
func (l *Layered) Undo(ctx context.Context, key string, r Result, increment int64) error {
	if err := l.db.checkCall(ctx, key); err != nil {
		return err
	}
	if increment <= 0 {
		return fmt.Errorf("%w: increment %d is not positive", ErrInvalidArgument, increment)
	}
	ends, err := l.undoEnds(r)
	if err != nil {
		return err
	}
	if ends == nil {
		// A denied r: nothing to take back, but a closed DB still answers
		// ErrClosed, as for every other call.
		if l.db.closing.Load() {
			return ErrClosed
		}
		return nil
	}
	cs, now, err := l.read(ctx, key)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(l.pos, func(p int) bool { return cs[p].End == ends[p] && cs[p].End > now }) {
		return nil
	}
	return l.mutate(key, func(e *entry, now int64) (bool, error) {
		changed := false
		for p, end := range ends {
			if c := e.tier(p); c.End == end && c.End > now && c.Count > 0 {
				c.Count = max(0, c.Count-increment)
				changed = true
			}
		}
		return changed, nil
	})
}

// undoEnds checks that r is the Result of a hit of l and returns the end of
// each tier's window it reports, in storage order; nil for a denied r.
func (l *Layered) undoEnds(r Result) ([]int64, error) {
	if len(r.Tiers) != len(l.tiers) {
		return nil, fmt.Errorf("%w: not the Result of a hit of this Layered limiter (%d tiers, want %d)", ErrInvalidArgument, len(r.Tiers), len(l.tiers))
	}
	for i, t := range r.Tiers {
		if t.Scale != l.tiers[i].Scale || (r.Allowed && t.ResetAt.IsZero()) {
			return nil, fmt.Errorf("%w: not the Result of a hit of this Layered limiter (tier %d)", ErrInvalidArgument, i)
		}
	}
	if !r.Allowed {
		return nil, nil
	}
	ends := make([]int64, len(l.tiers))
	for i, t := range r.Tiers {
		ends[l.pos[i]] = t.ResetAt.UnixMilli()
	}
	return ends, nil
}

// Get returns key's count in each tier's current window (0 for a tier with
// none), in tier order. It opens no window.
func (l *Layered) Get(ctx context.Context, key string) ([]int64, error) {
	cs, now, err := l.read(ctx, key)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(l.tiers))
	for i, p := range l.pos {
		if c := cs[p]; c.End > now {
			out[i] = c.Count
		}
	}
	return out, nil
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
// always describe the same windows, even when a concurrent call opens a
// tier's next window meanwhile. It opens no window.
func (l *Layered) State(ctx context.Context, key string) ([]int64, []time.Time, error) {
	cs, now, err := l.read(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	counts, ends := make([]int64, len(l.tiers)), make([]time.Time, len(l.tiers))
	for i, p := range l.pos {
		if c := cs[p]; c.End > now {
			counts[i], ends[i] = c.Count, time.UnixMilli(c.End)
		}
	}
	return counts, ends, nil
}

// Reset forgets key's windows in every tier.
func (l *Layered) Reset(ctx context.Context, key string) error {
	if err := l.db.checkCall(ctx, key); err != nil {
		return err
	}
	return l.reset(key)
}

// current returns the count and end of the spec's tier i as seen at now.
func (l *Layered) current(c *counter, i int, key string, now int64) (count, end int64) {
	if c.End > now {
		return c.Count, c.End
	}
	return 0, l.nextEnd(i, key, now)
}

// read returns a copy of every tier's counter, in the spec's order (zero
// counters if the key has no state).
func (l *Layered) read(ctx context.Context, key string) ([]counter, int64, error) {
	if err := l.db.checkCall(ctx, key); err != nil {
		return nil, 0, err
	}
	db := l.db
	h := l.hash(key)
	if !db.enter(h) {
		return nil, 0, ErrClosed
	}
	defer db.exit(h)
	cs, now, err := l.peek(key, h, make([]counter, 0, len(l.tiers)))
	if err != nil {
		return nil, 0, err
	}
	for len(cs) < len(l.tiers) {
		cs = append(cs, counter{})
	}
	return cs, now, nil
}
