package ratedb

import (
	"context"
	"fmt"
	"time"

	"github.com/ratedb/ratedb/internal/limits"
)

// Window is a limiter over windows of one algorithm and one scale, obtained
// from DB.Window. Each key has its own counter; windows of different
// algorithms or scales never share a counter, even for the same key.
//
// A Window is safe for concurrent use. Every method that returns an error
// returns ErrClosed once the DB is closing.
type Window struct {
	*spec
}

// Window returns the limiter for windows of the given algorithm and scale.
// Calls with the same arguments return the same *Window. scale must be at
// least one millisecond and a whole number of milliseconds.
func (db *DB) Window(alg Algorithm, scale time.Duration) (*Window, error) {
	if db.closing.Load() {
		return nil, ErrClosed // whatever the arguments: see ErrClosed
	}
	if err := limits.Algorithm(int(alg)); err != nil {
		return nil, err
	}
	ms, err := scaleMillis(scale)
	if err != nil {
		return nil, err
	}
	s, err := db.specFor(alg, []int64{ms}, false)
	if err != nil {
		return nil, err
	}
	return s.window, nil
}

// Algorithm returns the window's algorithm.
func (w *Window) Algorithm() Algorithm { return w.alg }

// Scale returns the window length.
func (w *Window) Scale() time.Duration { return time.Duration(w.scales[0]) * time.Millisecond }

// Hit counts increment against key if the key's current window has room for
// it under limit (count+increment <= limit), and reports the decision. A
// denied hit counts nothing and does not open a window; one whose increment
// exceeds limit, on a key with no open window, does not even bring the key
// into memory. With N goroutines
// hitting one key, exactly limit hits of increment 1 are allowed per window.
//
// limit must be >= 0 (0 denies every hit) and increment > 0.
func (w *Window) Hit(ctx context.Context, key string, limit, increment int64) (r Result, err error) {
	if err := w.db.checkCall(ctx, key); err != nil {
		return Result{}, err
	}
	if limit < 0 {
		return Result{}, fmt.Errorf("%w: limit %d is negative", ErrInvalidArgument, limit)
	}
	if increment <= 0 {
		return Result{}, fmt.Errorf("%w: increment %d is not positive", ErrInvalidArgument, increment)
	}
	db := w.db
	h := w.hash(key)
	if !db.enter(h) {
		return Result{}, ErrClosed
	}
	if increment > limit {
		r, ok, err := w.deniedOutright(key, h, limit)
		if err != nil {
			db.exit(h)
			return Result{}, err
		}
		if ok {
			db.exitHit(h, false)
			return r, nil
		}
	}
	e, now, cold, err := w.acquire(key, h)
	if err != nil {
		db.exit(h)
		return Result{}, err
	}
	w.capEnds(e, h, now)
	c := &e.c
	count, end := w.current(c, key, now)
	allowed := count <= limit-increment
	if allowed {
		count += increment
		c.Count, c.End = count, end
		db.markDirty(e, h)
	}
	w.release(e, cold)
	db.exitHit(h, allowed)

	// Written field by field into the named result: returning a Result
	// built in a local copied it once more, 58.9 instead of 50.7 ns a hot
	// key's hit (medians of 8 interleaved runs of bench/'s
	// RatedbFile_HotKey/1goroutine).
	r.Allowed = allowed
	r.Count = count
	r.Limit = limit
	r.Remaining = max(0, limit-count)
	r.ResetAt = time.UnixMilli(end)
	r.Scale = w.Scale()
	if !allowed {
		r.RetryAfter = time.Duration(end-now) * time.Millisecond
	}
	return r, nil
}

// deniedOutright answers a Hit whose increment exceeds its limit, which is
// denied whatever key's state, if key has no open window: from a read, as
// Hit would (count 0, the window a hit at now would open), without bringing
// key into memory, where it would hold an empty entry, and a place in the
// cache, until the janitor took it out. ok is false if key has an open
// window: Hit then takes its usual path, which stores the clock model's cap
// of that window.
func (w *Window) deniedOutright(key string, h uint64, limit int64) (r Result, ok bool, err error) {
	var buf [1]counter
	cs, now, err := w.peek(key, h, buf[:0])
	if err != nil || (len(cs) > 0 && cs[0].End > now) {
		return Result{}, false, err
	}
	_, end := w.current(&counter{}, key, now)
	return Result{
		Limit:      limit,
		Remaining:  limit,
		ResetAt:    time.UnixMilli(end),
		Scale:      w.Scale(),
		RetryAfter: time.Duration(end-now) * time.Millisecond,
	}, true, nil
}

// Inc adds increment (> 0) to key's count in its current window, opening a
// window if there is none, without a limit check, and returns the new count.
// An increment that would take the count past 1<<63-1 is refused with
// ErrInvalidArgument and changes nothing.
func (w *Window) Inc(ctx context.Context, key string, increment int64) (int64, error) {
	if err := w.db.checkCall(ctx, key); err != nil {
		return 0, err
	}
	if increment <= 0 {
		return 0, fmt.Errorf("%w: increment %d is not positive", ErrInvalidArgument, increment)
	}
	return w.mutate(key, func(c *counter, now int64) (int64, error) {
		count, end := w.current(c, key, now)
		if count > maxCount-increment {
			return 0, fmt.Errorf("%w: increment %d would overflow the count", ErrInvalidArgument, increment)
		}
		c.Count, c.End = count+increment, end
		return c.Count, nil
	})
}

// Set sets key's count (>= 0) and returns it. For FixedWindow and
// StaggeredWindow it sets the count of the current window (opening it if
// needed); for PerKeyWindow it restarts the key's window at now, as the
// Elixir library Hammer does.
func (w *Window) Set(ctx context.Context, key string, count int64) (int64, error) {
	if err := w.db.checkCall(ctx, key); err != nil {
		return 0, err
	}
	if count < 0 {
		return 0, fmt.Errorf("%w: count %d is negative", ErrInvalidArgument, count)
	}
	return w.mutate(key, func(c *counter, now int64) (int64, error) {
		if w.alg == PerKeyWindow {
			c.Count, c.End = count, perKeyEnd(now, w.scales[0])
			return count, nil
		}
		_, end := w.current(c, key, now)
		c.Count, c.End = count, end
		return count, nil
	})
}

// Refund gives amount (> 0) back to key's current window: its count drops
// by amount, never below zero, and its end does not move. It returns the
// count after the refund and the window's end. A key with no current window
// has nothing to give back: Refund opens none, and returns 0 and the zero
// Time.
//
// A refund is one step with respect to every other call on the key: a hit
// that races it is counted before it or after it, never lost. Use it to
// give back hits for work that did not happen (a request that failed
// downstream, Envoy's is_negative_hits).
func (w *Window) Refund(ctx context.Context, key string, amount int64) (int64, time.Time, error) {
	if err := w.db.checkCall(ctx, key); err != nil {
		return 0, time.Time{}, err
	}
	if amount <= 0 {
		return 0, time.Time{}, fmt.Errorf("%w: amount %d is not positive", ErrInvalidArgument, amount)
	}
	// A key with no window anywhere gets no entry: look before locking one.
	if c, now, err := w.read(ctx, key); err != nil || c.End <= now {
		return 0, time.Time{}, err
	}
	var count, end int64
	err := w.spec.mutate(key, func(e *entry, now int64) (bool, error) {
		if e.c.End <= now {
			return false, nil // ended since the read: nothing to give back
		}
		e.c.Count = max(0, e.c.Count-amount)
		count, end = e.c.Count, e.c.End
		return true, nil
	})
	if err != nil || end == 0 {
		return 0, time.Time{}, err
	}
	return count, time.UnixMilli(end), nil
}

// Undo takes back an allowed Hit of increment (> 0) on key whose
// Result is r: the count of the window the hit counted in drops by
// increment, never below zero, if that window is still key's current one
// (it still ends at r.ResetAt). A window that has ended since, or whose end
// the clock model moved, is left alone, as is any window opened after it:
// an undo never gives back room the hit did not take. A denied r counted
// nothing, and Undo does nothing. Undo opens no window.
//
// A window is known by its end. After a Reset, the first hit opens a window
// that, with FixedWindow and StaggeredWindow, ends when the cleared one
// did: an Undo of a hit made before the Reset then takes from that new
// window. Do not undo across a Reset. The same holds after the clock went
// back and the clock model cut the hit's window short: a window opened once
// the cut one has ended may end when the hit's did, and an Undo takes from
// it. With the default clock, time goes back only across a restart, which
// no Result outlives.
//
// Like Refund, an undo is one step with respect to every other call on the
// key. Use it when a hit must be taken back because something decided
// after it failed: ratedb serve undoes the hits of a set of checks that a
// later check of the same set denied.
func (w *Window) Undo(ctx context.Context, key string, r Result, increment int64) error {
	if err := w.db.checkCall(ctx, key); err != nil {
		return err
	}
	switch {
	case increment <= 0:
		return fmt.Errorf("%w: increment %d is not positive", ErrInvalidArgument, increment)
	case r.Tiers != nil || r.Scale != w.Scale() || (r.Allowed && r.ResetAt.IsZero()):
		return fmt.Errorf("%w: not the Result of a hit of this Window", ErrInvalidArgument)
	case !r.Allowed:
		// Nothing to take back, but a closed DB still answers ErrClosed,
		// as for every other call.
		if w.db.closing.Load() {
			return ErrClosed
		}
		return nil
	}
	end := r.ResetAt.UnixMilli()
	if c, now, err := w.read(ctx, key); err != nil || c.End != end || c.End <= now {
		return err
	}
	return w.spec.mutate(key, func(e *entry, now int64) (bool, error) {
		if c := &e.c; c.End == end && c.End > now && c.Count > 0 {
			c.Count = max(0, c.Count-increment)
			return true, nil
		}
		return false, nil
	})
}

// Get returns key's count in its current window, 0 if it has none. It does
// not open a window.
func (w *Window) Get(ctx context.Context, key string) (int64, error) {
	n, _, err := w.State(ctx, key)
	return n, err
}

// ExpiresAt returns the end of key's current window, the zero Time if it has
// none.
func (w *Window) ExpiresAt(ctx context.Context, key string) (time.Time, error) {
	_, end, err := w.State(ctx, key)
	return end, err
}

// State returns key's count in its current window and the window's end
// (0 and the zero Time if it has none), read in one step: unlike Get and
// ExpiresAt called one after the other, the two always describe the same
// window, even when a concurrent call opens the key's next window
// meanwhile. It does not open a window.
func (w *Window) State(ctx context.Context, key string) (int64, time.Time, error) {
	c, now, err := w.read(ctx, key)
	if err != nil || c.End <= now {
		return 0, time.Time{}, err
	}
	return c.Count, time.UnixMilli(c.End), nil
}

// Reset forgets key's current window: the next hit opens a new one.
func (w *Window) Reset(ctx context.Context, key string) error {
	if err := w.db.checkCall(ctx, key); err != nil {
		return err
	}
	return w.reset(key)
}

// current returns c's count and end as seen at now: the stored window if it
// is still open, else an empty window that a hit at now would open.
func (w *Window) current(c *counter, key string, now int64) (count, end int64) {
	if c.End > now {
		return c.Count, c.End
	}
	return 0, w.nextEnd(0, key, now)
}

// mutate runs fn on key's counter with the entry locked and marks it dirty
// when fn succeeds.
func (w *Window) mutate(key string, fn func(c *counter, now int64) (int64, error)) (int64, error) {
	var v int64
	err := w.spec.mutate(key, func(e *entry, now int64) (bool, error) {
		var err error
		v, err = fn(&e.c, now)
		return err == nil, err
	})
	return v, err
}

// read returns a copy of key's counter without opening a window.
func (w *Window) read(ctx context.Context, key string) (counter, int64, error) {
	if err := w.db.checkCall(ctx, key); err != nil {
		return counter{}, 0, err
	}
	db := w.db
	h := w.hash(key)
	if !db.enter(h) {
		return counter{}, 0, ErrClosed
	}
	defer db.exit(h)
	var buf [1]counter
	cs, now, err := w.peek(key, h, buf[:0])
	if err != nil || len(cs) == 0 {
		return counter{}, now, err
	}
	return cs[0], now, nil
}

// fixedEnd returns the end of the epoch-aligned window of length scale that
// contains now: the smallest multiple of scale greater than now. It is pure;
// see FuzzWindowArithmetic.
func fixedEnd(now, scale int64) int64 {
	return floorDiv(now, scale)*scale + scale
}

// floorDiv is a/b rounded towards negative infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
