package limitertest

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

func testLayeredAllOrNothing(t *testing.T, b Backend) {
	c := NewClock()
	l, err := open(t, b, c).Layered(ratedb.FixedWindow,
		ratedb.Tier{Scale: time.Minute, Limit: 1},
		ratedb.Tier{Scale: 15 * time.Minute, Limit: 3},
	)
	require.NoError(t, err)
	assert.Equal(t, []ratedb.Tier{{Scale: time.Minute, Limit: 1}, {Scale: 15 * time.Minute, Limit: 3}}, l.Tiers())

	r, err := l.Hit(ctx, "login", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	assert.Equal(t, 0, r.Tier, "the per-minute tier has the least room")
	assert.Equal(t, []ratedb.TierResult{
		{Scale: time.Minute, Limit: 1, Count: 1, Remaining: 0, ResetAt: Epoch.Add(time.Minute), Fits: true},
		{Scale: 15 * time.Minute, Limit: 3, Count: 1, Remaining: 2, ResetAt: Epoch.Add(15 * time.Minute), Fits: true},
	}, normalize(r.Tiers))
	assert.Equal(t, int64(1), r.Count)
	assert.Equal(t, int64(1), r.Limit)
	assert.Zero(t, r.Remaining)
	assert.Zero(t, r.RetryAfter)
	assert.Equal(t, time.Minute, r.Scale)

	r, err = l.Hit(ctx, "login", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.Equal(t, 0, r.Tier)
	assert.False(t, r.Tiers[0].Fits)
	assert.True(t, r.Tiers[1].Fits)
	assert.Equal(t, time.Minute, r.RetryAfter)
	assert.Equal(t, int64(1), r.Tiers[1].Count, "a denied hit counts in no tier")

	for i := 0; i < 2; i++ {
		c.Advance(time.Minute)
		r, err = l.Hit(ctx, "login", 1)
		require.NoError(t, err)
		require.True(t, r.Allowed, "minute %d", i+1)
	}
	c.Advance(time.Minute) // minute 3: the 15-minute tier is full
	r, err = l.Hit(ctx, "login", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.Equal(t, 1, r.Tier, "the 15-minute tier denied")
	assert.True(t, r.Tiers[0].Fits)
	assert.Zero(t, r.Tiers[0].Count, "no phantom count in the shorter tier")
	assert.True(t, Epoch.Add(4*time.Minute).Equal(r.Tiers[0].ResetAt))
	assert.Equal(t, 12*time.Minute, r.RetryAfter)
	assert.Equal(t, int64(3), r.Count)
	assert.Equal(t, int64(3), r.Limit)
	assert.Equal(t, 15*time.Minute, r.Scale)

	counts, err := l.Get(ctx, "login")
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 3}, counts)
	ends, err := l.ExpiresAt(ctx, "login")
	require.NoError(t, err)
	assert.True(t, ends[0].IsZero())
	assert.True(t, Epoch.Add(15*time.Minute).Equal(ends[1]))

	c.Advance(12 * time.Minute)
	r, err = l.Hit(ctx, "login", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed, "RetryAfter was exact")

	require.NoError(t, l.Reset(ctx, "login"))
	counts, err = l.Get(ctx, "login")
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, counts)
	ends, err = l.ExpiresAt(ctx, "login")
	require.NoError(t, err)
	assert.True(t, ends[0].IsZero() && ends[1].IsZero())

	n, err := l.Inc(ctx, "login", 5)
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 5}, n)
	r, err = l.Hit(ctx, "login", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed, "Inc counted past both limits")
	assert.Equal(t, 1, r.Tier, "both deny; the 15-minute tier frees up last")

	// PerKeyWindow: each tier's window starts at the first hit it counts.
	p, err := open(t, b, c).Layered(ratedb.PerKeyWindow,
		ratedb.Tier{Scale: time.Hour, Limit: 3}, ratedb.Tier{Scale: time.Minute, Limit: 1})
	require.NoError(t, err)
	start := c.Now()
	_, err = p.Hit(ctx, "k", 1)
	require.NoError(t, err)
	c.Advance(time.Minute)
	r, err = p.Hit(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	assert.True(t, start.Add(time.Hour).Equal(r.Tiers[0].ResetAt), "the hour tier keeps its first window")
	assert.True(t, c.Now().Add(time.Minute).Equal(r.Tiers[1].ResetAt), "the minute tier opened a new one")
	assert.Equal(t, 1, r.Tier, "allowed: the tier with the least room")
}

// normalize drops the monotonic and location parts of the times in trs, so
// that results compare with assert.Equal.
func normalize(trs []ratedb.TierResult) []ratedb.TierResult {
	out := append([]ratedb.TierResult(nil), trs...)
	for i := range out {
		out[i].ResetAt = time.UnixMilli(out[i].ResetAt.UnixMilli())
	}
	return out
}

func testLayeredRetryAfter(t *testing.T, b Backend) {
	c := NewClock()
	c.Advance(30 * time.Second)
	l, err := open(t, b, c).Layered(ratedb.FixedWindow,
		ratedb.Tier{Scale: time.Hour, Limit: 2},
		ratedb.Tier{Scale: time.Minute, Limit: 2},
		ratedb.Tier{Scale: 24 * time.Hour, Limit: 100},
	)
	require.NoError(t, err)
	_, err = l.Hit(ctx, "k", 2)
	require.NoError(t, err)
	r, err := l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.Equal(t, 0, r.Tier, "of the two denying tiers, the hour frees up last")
	assert.Equal(t, time.Hour-30*time.Second, r.RetryAfter)
	assert.Equal(t, []bool{false, false, true}, []bool{r.Tiers[0].Fits, r.Tiers[1].Fits, r.Tiers[2].Fits})
	assert.Equal(t, int64(98), r.Tiers[2].Remaining)
}

// Concurrency parameters: Handles handles (processes) × Goroutines
// goroutines each hit one key.
const (
	Handles    = 8
	Goroutines = 16
)

// testConcurrentExactness hits one key from Handles handles × Goroutines
// goroutines, for every algorithm and for a Layered limiter, through
// several phases of the fake clock; in every phase exactly the limit is
// allowed and the stored count is exactly what was allowed.
func testConcurrentExactness(t *testing.T, b Backend) {
	const perG = 6 // hits per goroutine per phase: 768 per phase, limit 500
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c := NewClock()
			handle := b.Open(t, c.Now)
			ws := make([]ratedb.Limiter, Handles)
			for i := range ws {
				w, err := handle().Window(alg, time.Minute)
				require.NoError(t, err)
				ws[i] = w
			}
			const limit = 500
			for phase := 0; phase < 2; phase++ {
				allowed := hammer(t, perG, func(h int) (bool, error) {
					r, err := ws[h].Hit(ctx, "hot", limit, 1)
					return r.Allowed, err
				})
				assert.Equal(t, int64(limit), allowed, "phase %d: exactly limit hits allowed", phase)
				n, err := ws[0].Get(ctx, "hot")
				require.NoError(t, err)
				assert.Equal(t, int64(limit), n, "phase %d", phase)
				c.Advance(time.Minute)
			}
		})
	}
	// Layered, for the algorithms whose windows the phases below align with
	// (a StaggeredWindow hour tier may end between two phases).
	for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow} {
		t.Run("Layered"+alg.String(), func(t *testing.T) { testLayeredExactness(t, b, alg) })
	}
}

func testLayeredExactness(t *testing.T, b Backend, alg ratedb.Algorithm) {
	{
		c := NewClock()
		handle := b.Open(t, c.Now)
		tiers := []ratedb.Tier{
			{Scale: time.Minute, Limit: 70},
			{Scale: time.Hour, Limit: 200},
			{Scale: 24 * time.Hour, Limit: 10000},
		}
		ls := make([]Layered, Handles)
		for i := range ls {
			l, err := handle().Layered(alg, tiers...)
			require.NoError(t, err)
			ls[i] = l
		}
		var total int64
		for phase := 0; phase < 4; phase++ {
			allowed := hammer(t, 1, func(h int) (bool, error) {
				r, err := ls[h].Hit(ctx, "key", 1)
				return r.Allowed, err
			})
			// Model: each phase is a fresh minute; the hour tier caps the
			// total at 200.
			want := min(int64(70), 200-total)
			assert.Equal(t, want, allowed, "phase %d", phase)
			total += allowed
			counts, err := ls[0].Get(ctx, "key")
			require.NoError(t, err)
			assert.Equal(t, []int64{want, total, total}, counts, "phase %d", phase)
			c.Advance(time.Minute)
		}
	}
}

// hammer runs Handles × Goroutines goroutines, goroutine g of handle h
// calling hit(h) perG times, and returns how many calls were allowed.
func hammer(t *testing.T, perG int, hit func(h int) (bool, error)) int64 {
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for h := 0; h < Handles; h++ {
		for g := 0; g < Goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < perG; i++ {
					ok, err := hit(h)
					if err != nil {
						t.Error(fmt.Errorf("handle %d: %w", h, err))
						return
					}
					if ok {
						allowed.Add(1)
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	return allowed.Load()
}
