package ratedb_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLayeredConcurrentExactness hits one key from many goroutines through
// several phases of a fake clock; in every phase the allowed total must be
// exactly what a sequential model allows, and every tier must hold exactly
// the allowed total of its window.
func TestLayeredConcurrentExactness(t *testing.T) {
	for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			modes(t, func(t *testing.T, path string) {
				c := newClock()
				opts := testOptions(c)
				opts.MaxHotKeys = 4
				db := openDB(t, path, opts)
				tiers := []ratedb.Tier{
					{Scale: time.Minute, Limit: 7},
					{Scale: time.Hour, Limit: 20},
					{Scale: 24 * time.Hour, Limit: 1000},
				}
				l, err := db.Layered(alg, tiers...)
				require.NoError(t, err)
				var total int64
				for phase := 0; phase < 4; phase++ {
					var allowed atomic.Int64
					var wg sync.WaitGroup
					for g := 0; g < 32; g++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for i := 0; i < 20; i++ {
								r, err := l.Hit(ctx, "key", 1)
								if err != nil {
									t.Error(err)
									return
								}
								if r.Allowed {
									allowed.Add(1)
								}
								// Churn other keys through the tiny cache.
								if _, err := l.Hit(ctx, fmt.Sprint("noise-", g, "-", i), 1); err != nil {
									t.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					// Model: each phase is a fresh minute; the hour tier
					// caps the total at 20.
					want := min(int64(7), 20-total)
					assert.Equal(t, want, allowed.Load(), "phase %d", phase)
					total += allowed.Load()
					counts, err := l.Get(ctx, "key")
					require.NoError(t, err)
					assert.Equal(t, want, counts[0], "minute tier, phase %d", phase)
					if alg == ratedb.FixedWindow || alg == ratedb.PerKeyWindow {
						assert.Equal(t, total, counts[1], "hour tier, phase %d", phase)
					}
					if path != "" {
						require.NoError(t, db.Snapshot())
					}
					c.Advance(time.Minute)
				}
			})
		})
	}
}

func TestLayeredRestartAndJanitor(t *testing.T) {
	path := tempPath(t)
	c := newClock()
	opts := testOptions(c)
	db, err := ratedb.Open(path, opts)
	require.NoError(t, err)
	tiers := []ratedb.Tier{{Scale: time.Minute, Limit: 5}, {Scale: time.Hour, Limit: 10}}
	l, err := db.Layered(ratedb.FixedWindow, tiers...)
	require.NoError(t, err)
	_, err = l.Hit(ctx, "k", 4)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	db = openDB(t, path, opts)
	l, err = db.Layered(ratedb.FixedWindow, tiers...)
	require.NoError(t, err)
	counts, err := l.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{4, 4}, counts, "every tier resumes")

	c.Advance(2 * time.Minute) // the minute tier expired, the hour tier did not
	removed, err := db.Clean()
	require.NoError(t, err)
	assert.Zero(t, removed, "a layered key stays while any tier is live")
	counts, err = l.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 4}, counts)

	c.Advance(time.Hour)
	removed, err = db.Clean()
	require.NoError(t, err)
	assert.Equal(t, 1, removed)
	assert.Zero(t, db.Stats().WindowsOnDisk)
}

func TestLayeredValidation(t *testing.T) {
	db := openDB(t, "", testOptions(newClock()))
	many := make([]ratedb.Tier, 17)
	for i := range many {
		many[i] = ratedb.Tier{Scale: time.Duration(i+1) * time.Second, Limit: 1}
	}
	cases := map[string][]ratedb.Tier{
		"no tiers":       nil,
		"too many tiers": many,
		"zero scale":     {{Scale: 0, Limit: 1}},
		"sub-ms scale":   {{Scale: time.Minute, Limit: 1}, {Scale: 10 * time.Microsecond, Limit: 1}},
		"negative limit": {{Scale: time.Minute, Limit: -1}},
	}
	for name, tiers := range cases {
		_, err := db.Layered(ratedb.FixedWindow, tiers...)
		assert.ErrorIs(t, err, ratedb.ErrInvalidArgument, name)
	}
	_, err := db.Layered(ratedb.Algorithm(0), ratedb.Tier{Scale: time.Minute, Limit: 1})
	assert.ErrorIs(t, err, ratedb.ErrInvalidArgument)

	l, err := db.Layered(ratedb.PerKeyWindow, ratedb.Tier{Scale: time.Hour, Limit: 3}, ratedb.Tier{Scale: time.Minute, Limit: 1})
	require.NoError(t, err, "tiers need not be ordered")
	assert.Equal(t, []ratedb.Tier{{Scale: time.Hour, Limit: 3}, {Scale: time.Minute, Limit: 1}}, l.Tiers())
	_, err = l.Hit(ctx, "k", 0)
	assert.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	_, err = l.Hit(ctx, "", 1)
	assert.ErrorIs(t, err, ratedb.ErrInvalidArgument)
}

// TestStaggeredSpreadsResets checks that StaggeredWindow keys reset at
// different instants, each at a stable offset from the aligned boundary, and
// that a key's boundaries are the same after a restart.
func TestStaggeredSpreadsResets(t *testing.T) {
	path := tempPath(t)
	c := newClock()
	db, err := ratedb.Open(path, testOptions(c))
	require.NoError(t, err)
	w, err := db.Window(ratedb.StaggeredWindow, time.Minute)
	require.NoError(t, err)
	ends := map[int64]bool{}
	first := map[string]time.Time{}
	for i := 0; i < 100; i++ {
		k := fmt.Sprint("client-", i)
		r, err := w.Hit(ctx, k, 10, 1)
		require.NoError(t, err)
		ends[r.ResetAt.UnixMilli()] = true
		first[k] = r.ResetAt
		d := r.ResetAt.Sub(c.Now())
		assert.True(t, d > 0 && d <= time.Minute, "window contains now")
	}
	assert.Greater(t, len(ends), 90, "resets are spread over the minute")
	require.NoError(t, db.Close())

	// After a restart, a key's next window ends exactly one scale later.
	c.Advance(time.Minute)
	db = openDB(t, path, testOptions(c))
	w, err = db.Window(ratedb.StaggeredWindow, time.Minute)
	require.NoError(t, err)
	for k, end := range first {
		r, err := w.Hit(ctx, k, 10, 1)
		require.NoError(t, err)
		assert.True(t, end.Add(time.Minute).Equal(r.ResetAt), "key %s keeps its boundaries", k)
	}
}

// Bug 8 of issue 9: Layered limiters with the same algorithm and the same
// set of scales share counters whatever the order of their tiers; each
// reports its tiers in its own order. Before the fix (1m, 1h) and (1h, 1m)
// counted apart.
func TestLayeredSharesBySetOfScales(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		c := newClock()
		db := openDB(t, path, testOptions(c))
		minuteFirst, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 1}, ratedb.Tier{Scale: time.Hour, Limit: 3})
		require.NoError(t, err)
		hourFirst, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Hour, Limit: 3}, ratedb.Tier{Scale: time.Minute, Limit: 1})
		require.NoError(t, err)

		r, err := minuteFirst.Hit(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		r, err = hourFirst.Hit(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, r.Allowed, "the minute tier is shared and full")
		require.Len(t, r.Tiers, 2)
		assert.Equal(t, time.Hour, r.Tiers[0].Scale)
		assert.Equal(t, int64(1), r.Tiers[0].Count)
		assert.True(t, r.Tiers[0].Fits)
		assert.Equal(t, time.Minute, r.Tiers[1].Scale)
		assert.Equal(t, int64(1), r.Tiers[1].Count)
		assert.False(t, r.Tiers[1].Fits)
		assert.Equal(t, 1, r.Tier, "the minute tier, second as given, denied")
		assert.True(t, r.ResetAt.Equal(epoch.Add(time.Minute)))

		counts, err := hourFirst.Inc(ctx, "k", 1)
		require.NoError(t, err)
		assert.Equal(t, []int64{2, 2}, counts, "in hourFirst's order")
		got, err := minuteFirst.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, []int64{2, 2}, got)
		ends, err := hourFirst.ExpiresAt(ctx, "k")
		require.NoError(t, err)
		assert.True(t, ends[0].Equal(epoch.Add(time.Hour)))
		assert.True(t, ends[1].Equal(epoch.Add(time.Minute)))

		c.Advance(time.Minute) // the minute tier starts again; the hour tier holds 2 of 3
		r, err = hourFirst.Hit(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, r.Allowed)
		r, err = minuteFirst.Hit(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, r.Allowed)
		assert.Equal(t, []int64{1, 3}, []int64{r.Tiers[0].Count, r.Tiers[1].Count})
		if path == "" {
			return
		}
		require.NoError(t, db.Close())
		db = openDB(t, path, testOptions(c))
		hourFirst, err = db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Hour, Limit: 3}, ratedb.Tier{Scale: time.Minute, Limit: 1})
		require.NoError(t, err)
		got, err = hourFirst.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, []int64{3, 1}, got, "counts survive a restart")
	})
}

// TestLayeredZeroLimitDeniesEveryHit pins Tier.Limit's doc: a tier with
// limit 0 denies every hit, so nothing is counted in any tier.
func TestLayeredZeroLimitDeniesEveryHit(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		db := openDB(t, path, testOptions(newClock()))
		l, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5}, ratedb.Tier{Scale: time.Hour, Limit: 0})
		require.NoError(t, err)
		for range 3 {
			r, err := l.Hit(ctx, "k", 1)
			require.NoError(t, err)
			assert.False(t, r.Allowed)
			assert.Equal(t, 1, r.Tier, "the zero tier binds")
		}
		counts, err := l.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, []int64{0, 0}, counts)
	})
}

// TestLayeredResult pins LayeredResult's doc: the binding tier is, on a
// denial, the denying tier that frees up last, otherwise the tier with the
// least room left and, of tiers with as little, the one that frees up last,
// remaining ties going to the earlier tier; its figures are copied
// to the top level; a denial's RetryAfter runs from now to that tier's end;
// the Result keeps the slice.
func TestLayeredResult(t *testing.T) {
	now := epoch
	tier := func(scale time.Duration, limit, count int64, end time.Duration, fits bool) ratedb.TierResult {
		return ratedb.TierResult{Scale: scale, Limit: limit, Count: count, Remaining: max(0, limit-count), ResetAt: now.Add(end), Fits: fits}
	}
	cases := []struct {
		name    string
		allowed bool
		tiers   []ratedb.TierResult
		bind    int
	}{
		{"allowed: least room", true, []ratedb.TierResult{tier(time.Minute, 5, 1, time.Minute, true), tier(time.Hour, 10, 8, time.Hour, true)}, 1},
		{"allowed: of tiers with as little room, the one that frees up last", true, []ratedb.TierResult{tier(time.Hour, 10, 8, time.Hour, true), tier(time.Minute, 5, 3, time.Minute, true)}, 0},
		{"allowed: two full tiers report the one that frees up last", true, []ratedb.TierResult{tier(time.Minute, 1, 1, time.Minute, true), tier(15*time.Minute, 3, 3, 12*time.Minute, true), tier(time.Hour, 10, 3, time.Hour, true)}, 1},
		{"allowed: a full tie goes to the earlier tier", true, []ratedb.TierResult{tier(time.Minute, 5, 3, time.Minute, true), tier(time.Minute, 4, 2, time.Minute, true)}, 0},
		{"denied: the only denying tier", false, []ratedb.TierResult{tier(time.Minute, 5, 0, time.Minute, true), tier(time.Hour, 10, 10, 30*time.Minute, false)}, 1},
		{"denied: the denying tier that frees up last", false, []ratedb.TierResult{tier(time.Hour, 10, 10, 50*time.Minute, false), tier(time.Minute, 5, 5, 20*time.Second, false), tier(24*time.Hour, 20, 20, 3*time.Hour, false)}, 2},
		{"denied: a fitting tier that ends later does not bind", false, []ratedb.TierResult{tier(time.Minute, 5, 5, 10*time.Second, false), tier(time.Hour, 10, 1, time.Hour, true)}, 0},
		{"denied: a tie goes to the earlier tier", false, []ratedb.TierResult{tier(time.Minute, 5, 0, time.Minute, true), tier(time.Minute, 2, 2, 40*time.Second, false), tier(time.Minute, 3, 3, 40*time.Second, false)}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ratedb.LayeredResult(tc.allowed, now, tc.tiers)
			b := tc.tiers[tc.bind]
			assert.Equal(t, tc.allowed, r.Allowed)
			assert.Equal(t, tc.bind, r.Tier)
			assert.Equal(t, []any{b.Count, b.Limit, b.Remaining, b.Scale}, []any{r.Count, r.Limit, r.Remaining, r.Scale})
			assert.True(t, b.ResetAt.Equal(r.ResetAt))
			if tc.allowed {
				assert.Zero(t, r.RetryAfter)
			} else {
				assert.Equal(t, b.ResetAt.Sub(now), r.RetryAfter)
			}
			require.Len(t, r.Tiers, len(tc.tiers))
			assert.Same(t, &tc.tiers[0], &r.Tiers[0], "the Result keeps the slice")
		})
	}
}

// TestLayeredSharesOnlyTheSameScales pins which limiters share counters, as
// the README and Layered's doc say, across a restart: Layered limiters with
// the same algorithm and the same scales, each as many times, whatever
// their limits; not (1m) and (1m, 1m), not a Window and a one-tier Layered
// limiter of the same scale, and not a limiter whose tiers gained, lost or
// changed a scale (it starts new windows; the old ones are back if the old
// tiers are, until the janitor removes them).
func TestLayeredSharesOnlyTheSameScales(t *testing.T) {
	for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			modes(t, func(t *testing.T, path string) {
				c := newClock()
				db := openDB(t, path, testOptions(c))
				minute := ratedb.Tier{Scale: time.Minute, Limit: 5}
				hour := ratedb.Tier{Scale: time.Hour, Limit: 50}
				l, err := db.Layered(alg, minute, hour)
				require.NoError(t, err)
				_, err = l.Inc(ctx, "k", 2)
				require.NoError(t, err)
				one, err := db.Layered(alg, minute)
				require.NoError(t, err)
				_, err = one.Inc(ctx, "k", 3)
				require.NoError(t, err)
				w, err := db.Window(alg, time.Minute)
				require.NoError(t, err)
				_, err = w.Inc(ctx, "k", 4)
				require.NoError(t, err)
				if path != "" {
					require.NoError(t, db.Close())
					db = openDB(t, path, testOptions(c))
					w, err = db.Window(alg, time.Minute)
					require.NoError(t, err)
				}
				get := func(tiers ...ratedb.Tier) []int64 {
					t.Helper()
					l, err := db.Layered(alg, tiers...)
					require.NoError(t, err)
					got, err := l.Get(ctx, "k")
					require.NoError(t, err)
					return got
				}
				n, err := w.Get(ctx, "k")
				require.NoError(t, err)
				assert.Equal(t, int64(4), n, "the Window counts its own")
				assert.Equal(t, []int64{2, 2}, get(minute, hour))
				assert.Equal(t, []int64{2, 2}, get(ratedb.Tier{Scale: time.Hour, Limit: 1}, ratedb.Tier{Scale: time.Minute, Limit: 1}),
					"other limits, other order: the same windows")
				assert.Equal(t, []int64{3}, get(minute), "(1m) counts its own")
				assert.Equal(t, []int64{0, 0}, get(minute, minute), "(1m, 1m) counts its own")
				assert.Equal(t, []int64{0, 0, 0}, get(minute, hour, ratedb.Tier{Scale: 24 * time.Hour, Limit: 500}), "a tier added")
				assert.Equal(t, []int64{0}, get(hour), "a tier removed")
				assert.Equal(t, []int64{0, 0}, get(ratedb.Tier{Scale: 2 * time.Minute, Limit: 5}, hour), "a scale changed")
				assert.Equal(t, []int64{2, 2}, get(minute, hour), "the old tiers find their windows again")
			})
		})
	}
}

// TestLayeredRestartKeepsEveryTiersWindow: after a snapshot, a janitor
// pass once one tier's window has ended, and a restart, a Layered key
// resumes every tier with its count and its window's end, for each
// algorithm (PerKeyWindow's anchor at the tier's first hit,
// StaggeredWindow's offset), read through a limiter that gives the tiers in
// another order; the ended tier reads empty, and the key leaves the file
// only once its longest tier has ended.
func TestLayeredRestartKeepsEveryTiersWindow(t *testing.T) {
	for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			path := tempPath(t)
			c := newClock()
			c.Set(epoch.Add(17*time.Second + 3*time.Millisecond))
			opts := testOptions(c)
			db, err := ratedb.Open(path, opts)
			require.NoError(t, err)
			second := ratedb.Tier{Scale: time.Second, Limit: 5}
			minute := ratedb.Tier{Scale: time.Minute, Limit: 50}
			hour := ratedb.Tier{Scale: time.Hour, Limit: 100}
			l, err := db.Layered(alg, hour, second, minute)
			require.NoError(t, err)
			_, err = l.Hit(ctx, "k", 3)
			require.NoError(t, err)
			c.Advance(400 * time.Millisecond)
			r, err := l.Hit(ctx, "k", 2)
			require.NoError(t, err)
			require.True(t, r.Allowed)
			counts, ends, err := l.State(ctx, "k")
			require.NoError(t, err)
			require.NoError(t, db.Snapshot())

			c.Advance(2 * time.Second) // the second tier's window has ended
			removed, err := db.Clean()
			require.NoError(t, err)
			assert.Zero(t, removed)
			require.NoError(t, db.Close())

			db = openDB(t, path, opts)
			l, err = db.Layered(alg, minute, hour, second)
			require.NoError(t, err)
			got, gotEnds, err := l.State(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, []int64{counts[2], counts[0], 0}, got)
			assert.True(t, gotEnds[0].Equal(ends[2]), "minute ends at %v, want %v", gotEnds[0], ends[2])
			assert.True(t, gotEnds[1].Equal(ends[0]), "hour ends at %v, want %v", gotEnds[1], ends[0])
			assert.True(t, gotEnds[2].IsZero())

			c.Set(ends[0].Add(-time.Millisecond))
			removed, err = db.Clean()
			require.NoError(t, err)
			assert.Zero(t, removed, "the hour tier is live")
			c.Set(ends[0])
			removed, err = db.Clean()
			require.NoError(t, err)
			assert.Equal(t, 1, removed)
			assert.Zero(t, db.Stats().WindowsOnDisk)
		})
	}
}
