package limitertest

import (
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testClockStepBack checks the clock model of the root README (Guarantees,
// Clock) on every backend: after the clock steps back, a window that ends
// more than one scale after now is cut back to end one scale after now,
// its count kept, by a call that only reads (Get, ExpiresAt) as by one that
// writes; a window that ends within one scale of now is left as it is; and
// once the cut end has passed, the next hit opens a new window. The same
// holds for each tier of a Layered limiter, and a hit denied after the cut
// waits one scale, not the hour the clock went back.
func testClockStepBack(t *testing.T, b Backend) {
	const scale = time.Minute
	for _, alg := range algorithms {
		t.Run("Window"+alg.String(), func(t *testing.T) {
			c := NewClock()
			c.Advance(10 * time.Second)
			w, err := open(t, b, c).Window(alg, scale)
			require.NoError(t, err)
			r, err := w.Hit(ctx, "k", 3, 1)
			require.NoError(t, err)
			end := r.ResetAt

			// On 20 seconds, then back 5: the window ends within one scale
			// of now, and nothing is cut.
			c.Advance(20 * time.Second)
			c.Advance(-5 * time.Second)
			r, err = w.Hit(ctx, "k", 3, 1)
			require.NoError(t, err)
			assert.True(t, r.Allowed)
			assert.Equal(t, int64(2), r.Count)
			assert.True(t, end.Equal(r.ResetAt), "ResetAt %v, want the uncut end %v", r.ResetAt, end)

			// Back an hour: the window is cut to one scale after now.
			c.Advance(-time.Hour)
			cut := c.Now().Add(scale)
			at, err := w.ExpiresAt(ctx, "k")
			require.NoError(t, err)
			assert.True(t, cut.Equal(at), "ExpiresAt %v, want the cut end %v", at, cut)
			n, err := w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(2), n, "the cut keeps the count")
			r, err = w.Hit(ctx, "k", 3, 1)
			require.NoError(t, err)
			assert.True(t, r.Allowed)
			assert.Equal(t, int64(3), r.Count)
			assert.Zero(t, r.Remaining)
			assert.True(t, cut.Equal(r.ResetAt), "ResetAt %v, want the cut end %v", r.ResetAt, cut)
			r, err = w.Hit(ctx, "k", 3, 1)
			require.NoError(t, err)
			assert.False(t, r.Allowed)
			assert.Equal(t, int64(3), r.Count)
			assert.True(t, cut.Equal(r.ResetAt), "ResetAt %v, want the cut end %v", r.ResetAt, cut)
			assert.Equal(t, scale, r.RetryAfter, "a denial lasts one scale, not the hour the clock went back")

			// At the cut end the window is over: a hit opens a new one.
			c.Set(cut)
			r, err = w.Hit(ctx, "k", 3, 1)
			require.NoError(t, err)
			assert.True(t, r.Allowed)
			assert.Equal(t, int64(1), r.Count, "a new window")
			assert.True(t, r.ResetAt.After(cut) && !r.ResetAt.After(cut.Add(scale)),
				"ResetAt %v, want within one scale after %v", r.ResetAt, cut)
		})
	}
	t.Run("Layered", func(t *testing.T) {
		c := NewClock()
		c.Advance(10 * time.Second)
		l, err := open(t, b, c).Layered(ratedb.FixedWindow,
			ratedb.Tier{Scale: time.Hour, Limit: 9},
			ratedb.Tier{Scale: scale, Limit: 2},
		)
		require.NoError(t, err)
		r, err := l.Hit(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, r.Allowed)

		// Back two hours: each tier is cut to its own scale after now.
		c.Advance(-2 * time.Hour)
		now := c.Now()
		ends, err := l.ExpiresAt(ctx, "k")
		require.NoError(t, err)
		require.Len(t, ends, 2)
		assert.True(t, now.Add(time.Hour).Equal(ends[0]), "hour tier: ExpiresAt %v, want %v", ends[0], now.Add(time.Hour))
		assert.True(t, now.Add(scale).Equal(ends[1]), "minute tier: ExpiresAt %v, want %v", ends[1], now.Add(scale))
		counts, err := l.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, []int64{1, 1}, counts, "the cut keeps the counts")
		r, err = l.Hit(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, r.Allowed)
		r, err = l.Hit(ctx, "k", 1)
		require.NoError(t, err)
		assert.False(t, r.Allowed)
		assert.Equal(t, 1, r.Tier, "the minute tier denied")
		assert.Equal(t, scale, r.RetryAfter)
		require.Len(t, r.Tiers, 2)
		assert.Equal(t, []int64{2, 2}, []int64{r.Tiers[0].Count, r.Tiers[1].Count})
		assert.True(t, now.Add(time.Hour).Equal(r.Tiers[0].ResetAt), "hour tier: ResetAt %v", r.Tiers[0].ResetAt)
		assert.True(t, now.Add(scale).Equal(r.Tiers[1].ResetAt), "minute tier: ResetAt %v", r.Tiers[1].ResetAt)
	})
}
