package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/limits"
)

// Window is a limiter over windows of one algorithm and one scale in Redis,
// obtained from Store.Window. It answers exactly as a *ratedb.Window of the
// embedded DB does (see ratedb.Limiter), with one shared count per key for
// every process using the same Redis and Prefix. Windows of different
// algorithms or scales never share a counter, even for the same key.
//
// A Window is safe for concurrent use. Every method returns an error
// matching ratedb.ErrUnavailable, and no decision, when Redis does not
// answer within Options.Timeout.
type Window struct {
	sp *spec
}

var _ ratedb.Limiter = (*Window)(nil)

// Window returns the limiter for windows of the given algorithm and scale.
// scale must be at least one millisecond and a whole number of
// milliseconds; errors match ratedb.ErrInvalidArgument.
func (s *Store) Window(alg ratedb.Algorithm, scale time.Duration) (*Window, error) {
	if err := limits.Algorithm(int(alg)); err != nil {
		return nil, err
	}
	ms, err := limits.ScaleMillis(scale)
	if err != nil {
		return nil, err
	}
	return &Window{sp: s.newSpec(alg, []int64{ms}, false)}, nil
}

// Algorithm returns the window's algorithm.
func (w *Window) Algorithm() ratedb.Algorithm { return w.sp.alg }

// Scale returns the window length.
func (w *Window) Scale() time.Duration { return time.Duration(w.sp.scales[0]) * time.Millisecond }

// Hit counts increment against key if the key's current window has room for
// it under limit (count+increment <= limit), and reports the decision. A
// denied hit counts nothing and does not open a window. With any number of
// processes hitting one key, exactly limit hits of increment 1 are allowed
// per window.
//
// limit must be >= 0 (0 denies every hit) and increment > 0.
func (w *Window) Hit(ctx context.Context, key string, limit, increment int64) (ratedb.Result, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return ratedb.Result{}, err
	}
	if limit < 0 {
		return ratedb.Result{}, fmt.Errorf("%w: limit %d is negative", ratedb.ErrInvalidArgument, limit)
	}
	if increment <= 0 {
		return ratedb.Result{}, fmt.Errorf("%w: increment %d is not positive", ratedb.ErrInvalidArgument, increment)
	}
	allowed, now, ts, err := w.sp.count(ctx, key, true, increment, []int64{limit}, nil)
	if err != nil {
		return ratedb.Result{}, err
	}
	t := ts[0]
	r := ratedb.Result{
		Allowed:   allowed,
		Count:     t.count,
		Limit:     limit,
		Remaining: max(0, limit-t.count),
		ResetAt:   time.UnixMilli(t.end),
		Scale:     w.Scale(),
	}
	if !allowed {
		r.RetryAfter = time.Duration(t.end-now) * time.Millisecond
	}
	return r, nil
}

// Inc adds increment (> 0) to key's count in its current window, opening a
// window if there is none, without a limit check, and returns the new count.
// A count past MaxCount is refused with ratedb.ErrInvalidArgument.
func (w *Window) Inc(ctx context.Context, key string, increment int64) (int64, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return 0, err
	}
	if increment <= 0 {
		return 0, fmt.Errorf("%w: increment %d is not positive", ratedb.ErrInvalidArgument, increment)
	}
	if increment > MaxCount {
		return 0, fmt.Errorf("%w: increment %d would overflow the count", ratedb.ErrInvalidArgument, increment)
	}
	_, _, ts, err := w.sp.count(ctx, key, false, increment, nil, nil)
	if err != nil {
		return 0, err
	}
	return ts[0].count, nil
}

// Set sets key's count (0 to MaxCount) and returns it. For FixedWindow and
// StaggeredWindow it sets the count of the current window (opening it if
// needed); for PerKeyWindow it restarts the key's window at now. Like every
// call but Reset, it fails with an error matching ratedb.ErrUnavailable on a
// counter key holding a value ratedb did not write (one that Get and Hit
// refuse), and leaves that value as it is; Reset deletes it.
func (w *Window) Set(ctx context.Context, key string, count int64) (int64, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return 0, err
	}
	if count < 0 {
		return 0, fmt.Errorf("%w: count %d is negative", ratedb.ErrInvalidArgument, count)
	}
	if count > MaxCount {
		return 0, fmt.Errorf("%w: count %d is over MaxCount", ratedb.ErrInvalidArgument, count)
	}
	sp := w.sp
	sc := sp.scales[0]
	now, err := sp.s.nowArg()
	if err != nil {
		return 0, err
	}
	// Sent once, as Reset: a Set resent after a lost reply would overwrite
	// hits counted since the first one ran.
	_, err = sp.s.run(ctx, setScript, true, []string{sp.s.tagged(key) + sp.suffix},
		now, int(sp.alg), sc, sp.offset(key, sc), count)
	if err != nil {
		return 0, err
	}
	return count, nil
}

// Refund gives amount (> 0) back to key's current window: its count drops
// by amount, never below zero, and its end does not move. It returns the
// count after the refund and the window's end. A key with no current window
// has nothing to give back: Refund opens none, and returns 0 and the zero
// Time.
//
// A refund is one script, so it is one step with respect to every other
// call on the key from any process: a hit that races it is never lost. It
// is sent at most once: after a network error its effect is unknown, and
// it is not retried, since a refund applied twice would give back twice
// (the error means the refund may not have happened; the count is then
// too high, never too low).
func (w *Window) Refund(ctx context.Context, key string, amount int64) (int64, time.Time, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return 0, time.Time{}, err
	}
	if amount <= 0 {
		return 0, time.Time{}, fmt.Errorf("%w: amount %d is not positive", ratedb.ErrInvalidArgument, amount)
	}
	ts, err := w.sp.refund(ctx, key, amount)
	if err != nil || ts[0].end == 0 {
		return 0, time.Time{}, err
	}
	return ts[0].count, time.UnixMilli(ts[0].end), nil
}

// Undo takes back an allowed Hit of increment (> 0) on key whose Result is
// r: the count of the window the hit counted in drops by increment, never
// below zero, if that window is still key's current one (it still ends at
// r.ResetAt). A window that has ended since, or whose end was cut after
// time went back (see the package doc), is left alone, as is any window
// opened after it: an undo never gives back room the hit did not take. A
// denied r counted nothing, and Undo does nothing. Undo opens no window.
//
// A window is known by its end. After a Reset, the first hit opens a window
// that, with FixedWindow and StaggeredWindow, ends when the cleared one
// did: an Undo of a hit made before the Reset then takes from that new
// window. Do not undo across a Reset. The same holds after time went back
// and the hit's window was cut short: a window opened once the cut one has
// ended may end when the hit's did, and an Undo takes from it.
//
// An undo is one script, one step with respect to every other call on the
// key from any process. Like a refund it is sent at most once: after a
// network error the hit may still be counted (too high, never too low).
func (w *Window) Undo(ctx context.Context, key string, r ratedb.Result, increment int64) error {
	if err := limits.CheckCall(ctx, key); err != nil {
		return err
	}
	switch {
	case increment <= 0:
		return fmt.Errorf("%w: increment %d is not positive", ratedb.ErrInvalidArgument, increment)
	case r.Tiers != nil || r.Scale != w.Scale() || (r.Allowed && r.ResetAt.IsZero()):
		return fmt.Errorf("%w: not the Result of a hit of this Window", ratedb.ErrInvalidArgument)
	case !r.Allowed:
		return nil
	}
	_, err := w.sp.refund(ctx, key, increment, r.ResetAt.UnixMilli())
	return err
}

// Get returns key's count in its current window, 0 if it has none. It does
// not open a window.
func (w *Window) Get(ctx context.Context, key string) (int64, error) {
	n, _, err := w.State(ctx, key)
	return n, err
}

// ExpiresAt returns the end of key's current window, the zero Time if it
// has none.
func (w *Window) ExpiresAt(ctx context.Context, key string) (time.Time, error) {
	_, end, err := w.State(ctx, key)
	return end, err
}

// State returns key's count in its current window and the window's end
// (0 and the zero Time if it has none), read in one step: unlike Get and
// ExpiresAt called one after the other, the two always describe the same
// window, even when another process opens the key's next window meanwhile.
// It does not open a window.
func (w *Window) State(ctx context.Context, key string) (int64, time.Time, error) {
	if err := limits.CheckCall(ctx, key); err != nil {
		return 0, time.Time{}, err
	}
	ts, err := w.sp.read(ctx, key)
	if err != nil || ts[0].end == 0 {
		return 0, time.Time{}, err
	}
	return ts[0].count, time.UnixMilli(ts[0].end), nil
}

// Reset forgets key's current window: the next hit opens a new one.
func (w *Window) Reset(ctx context.Context, key string) error {
	if err := limits.CheckCall(ctx, key); err != nil {
		return err
	}
	return w.sp.reset(ctx, key)
}
