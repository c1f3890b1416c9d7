// Package limits holds the argument rules and the per-key stagger offset
// that every ratedb backend shares: the embedded DB in the root package and
// the network-backed ones (redisstore). Keeping them in one place makes the
// backends reject the same input with the same errors and place a
// StaggeredWindow key's boundaries at the same instants.
//
// Everything here is pure and safe for concurrent use.
package limits

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ratedb/ratedb/internal/record"
)

// ErrInvalidArgument is ratedb.ErrInvalidArgument (the root package
// re-exports this value, so errors.Is matches either name).
var ErrInvalidArgument = errors.New("ratedb: invalid argument")

// MaxKeyLen is the largest key, in bytes, that a limiter accepts
// (ratedb.MaxKeyLen).
const MaxKeyLen = 4096

// MaxTiers is the largest number of tiers of a Layered limiter (the most
// counters one record of the file holds).
const MaxTiers = record.MaxTiers

// MaxScaleMillis is the longest scale, in milliseconds (the longest
// time.Duration).
const MaxScaleMillis = int64(1<<63-1) / int64(time.Millisecond)

// Algorithm checks an algorithm number: 1 (FixedWindow), 2 (PerKeyWindow)
// or 3 (StaggeredWindow).
func Algorithm(alg int) error {
	if alg < 1 || alg > 3 {
		return fmt.Errorf("%w: unknown algorithm %d", ErrInvalidArgument, alg)
	}
	return nil
}

// ScaleMillis validates a scale and converts it to milliseconds.
func ScaleMillis(scale time.Duration) (int64, error) {
	if scale < time.Millisecond {
		return 0, fmt.Errorf("%w: scale %v is under one millisecond", ErrInvalidArgument, scale)
	}
	if scale%time.Millisecond != 0 {
		return 0, fmt.Errorf("%w: scale %v is not a whole number of milliseconds", ErrInvalidArgument, scale)
	}
	return int64(scale / time.Millisecond), nil
}

// Tiers validates the n tiers of a Layered limiter, tier i having the
// given scale and limit, and returns their scales in milliseconds.
func Tiers(n int, tier func(i int) (scale time.Duration, limit int64)) ([]int64, error) {
	if n == 0 {
		return nil, fmt.Errorf("%w: a layered limiter needs at least one tier", ErrInvalidArgument)
	}
	if n > MaxTiers {
		return nil, fmt.Errorf("%w: %d tiers, at most %d", ErrInvalidArgument, n, MaxTiers)
	}
	scales := make([]int64, n)
	for i := range scales {
		scale, limit := tier(i)
		ms, err := ScaleMillis(scale)
		if err != nil {
			return nil, fmt.Errorf("tier %d: %w", i, err)
		}
		if limit < 0 {
			return nil, fmt.Errorf("%w: tier %d: limit %d is negative", ErrInvalidArgument, i, limit)
		}
		scales[i] = ms
	}
	return scales, nil
}

// CheckCall validates the arguments every keyed call shares: a non-nil,
// live context and a key of 1 to MaxKeyLen bytes. The key itself is never
// echoed: it may be personal data.
func CheckCall(ctx context.Context, key string) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if len(key) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes is over MaxKeyLen (%d)", ErrInvalidArgument, len(key), MaxKeyLen)
	}
	return ctx.Err()
}

// StaggerOffset returns key's boundary offset for StaggeredWindow windows
// of length scale milliseconds (scale > 0): a stable hash of the key
// (64-bit FNV-1a, the same in every process, after every restart, on every
// machine and on every backend) reduced modulo the scale.
func StaggerOffset(key string, scale int64) int64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	return int64(h % uint64(scale))
}

// SortScales returns the scales of a Layered limiter's tiers (in the order
// given) sorted ascending, the order in which every backend stores them, and
// pos, where pos[i] is the stored position of given tier i. Sorting makes
// limiters with the same set of scales share counters whatever the order of
// their tiers; equal scales keep their given order.
func SortScales(given []int64) (pos []int, sorted []int64) {
	idx := make([]int, len(given))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(given[a], given[b]) })
	pos = make([]int, len(given))
	sorted = make([]int64, len(given))
	for j, i := range idx {
		pos[i] = j
		sorted[j] = given[i]
	}
	return pos, sorted
}
