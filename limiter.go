package ratedb

import (
	"context"
	"fmt"
	"time"
)

// Algorithm selects how a window's boundaries are placed in time.
type Algorithm int

const (
	// FixedWindow aligns every key's windows to multiples of the scale since
	// the Unix epoch: windows are [k*scale, (k+1)*scale) in Unix
	// milliseconds, so with a one-minute scale every key's window resets at
	// the top of each minute. The epoch is in UTC, whatever the clock's
	// time zone: a day's window ends at 00:00 UTC, a week's on Thursdays
	// (1970-01-01 was one), and a scale that does not divide an hour
	// restarts on its multiples since 1970, not on the hour.
	FixedWindow Algorithm = iota + 1

	// PerKeyWindow starts a key's window at its first allowed hit and runs it
	// for one scale: while the window is open every hit joins it, and the
	// first hit at or after its end opens the next one. It is the Redis
	// INCR + EXPIRE NX pattern.
	PerKeyWindow

	// StaggeredWindow is FixedWindow with each key's boundaries shifted by a
	// stable hash of the key (64-bit FNV-1a of the key modulo the scale, the
	// same in every process, after every restart and on every machine):
	// windows are [offset+k*scale, offset+(k+1)*scale), so keys do not all
	// reset at the same instant while each key's reset time stays
	// predictable.
	StaggeredWindow
)

// String returns the algorithm's Go name, or "Algorithm(n)" for an unknown
// value.
func (a Algorithm) String() string {
	switch a {
	case FixedWindow:
		return "FixedWindow"
	case PerKeyWindow:
		return "PerKeyWindow"
	case StaggeredWindow:
		return "StaggeredWindow"
	}
	return fmt.Sprintf("Algorithm(%d)", int(a))
}

// Result is the decision for one hit. Being over the limit is a result
// (Allowed false), not an error.
type Result struct {
	// Allowed reports whether the hit was admitted and counted. A denied hit
	// counts nothing.
	Allowed bool
	// Count is the count in the current window after this call.
	Count int64
	// Limit is the limit the hit was checked against.
	Limit int64
	// Remaining is max(0, Limit-Count).
	Remaining int64
	// ResetAt is the end of the current window (exclusive): the first
	// instant at which the count is back at zero.
	ResetAt time.Time
	// RetryAfter is 0 when the hit was allowed. When it was denied, it is the
	// time until the window ends, the earliest moment the same hit could fit
	// unless a Refund, Undo, Set or Reset lowers the count before then (hits
	// never do). An increment larger than the limit never fits; RetryAfter
	// is then still the time until the window ends.
	RetryAfter time.Duration
	// Scale is the length of the window that decided.
	Scale time.Duration
	// Tier is, for a Layered limiter, the index (in the order the tiers were
	// given) of the tier that bound the decision: on a denial the denying
	// tier that frees up last, otherwise the tier with the least room left
	// and, of tiers with as little, the one that frees up last (an allowed
	// hit that fills two tiers reports the one a denial would: nothing fits
	// before it frees up). It is 0 for a Window.
	Tier int
	// Tiers is, for a Layered limiter, the state of every tier after the
	// call, in the order the tiers were given. It is nil for a Window.
	Tiers []TierResult

	// _ pads Result from 104 to 112 bytes, a multiple of 16. Go copies a
	// returned Result in 16-byte moves; at 104 bytes the last move
	// overlaps the one before it, and a load that straddles an earlier
	// store waits for that store to complete. With the padding, a hot
	// key's Hit took 47.9 instead of 50.7 ns (medians of 8 interleaved
	// runs of bench/'s RatedbFile_HotKey/1goroutine).
	_ [8]byte
}

// TierResult is the state of one tier of a Layered limiter after a call.
type TierResult struct {
	// Scale is the tier's window length.
	Scale time.Duration
	// Limit is the tier's limit.
	Limit int64
	// Count is the count in this tier's current window after the call.
	Count int64
	// Remaining is max(0, Limit-Count).
	Remaining int64
	// ResetAt is the end of this tier's current window (exclusive).
	ResetAt time.Time
	// Fits reports whether this tier had room for the increment. A hit is
	// allowed only when every tier fits.
	Fits bool
}

// Limiter is the method set shared by every single-window limiter: *Window
// here, and network-backed variants elsewhere. Methods take a context first
// because a networked implementation may block; every error is meaningful
// (match with errors.Is), and being over the limit is never an error.
//
// Implementations are safe for concurrent use.
type Limiter interface {
	// Hit counts increment against key if the current window has room for
	// it under limit, and reports the decision.
	Hit(ctx context.Context, key string, limit, increment int64) (Result, error)
	// Inc adds increment to key's current window without a limit check and
	// returns the new count.
	Inc(ctx context.Context, key string, increment int64) (int64, error)
	// Get returns key's count in its current window, 0 if it has none.
	Get(ctx context.Context, key string) (int64, error)
	// Set sets key's count in its current window and returns it.
	Set(ctx context.Context, key string, count int64) (int64, error)
	// ExpiresAt returns the end of key's current window, the zero Time if it
	// has none.
	ExpiresAt(ctx context.Context, key string) (time.Time, error)
	// Refund gives amount back to key's current window, never below zero,
	// in one step (a racing hit is never lost), and returns the count
	// after it and the window's end; with no current window it opens none
	// and returns 0 and the zero Time.
	Refund(ctx context.Context, key string, amount int64) (int64, time.Time, error)
	// Undo takes back an allowed hit of increment whose Result is r from
	// the window it counted in, if that window is still key's current one,
	// in one step; a later window is never touched.
	Undo(ctx context.Context, key string, r Result, increment int64) error
	// Reset forgets key's current window.
	Reset(ctx context.Context, key string) error
	// Scale returns the window length.
	Scale() time.Duration
}

var _ Limiter = (*Window)(nil)
