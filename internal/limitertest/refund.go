package limitertest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
)

// testRefund checks Refund's answers for each algorithm: it lowers the
// current window's count, never below zero, keeps the window's end, opens
// no window for a key without one, and gives nothing back to a window that
// has ended.
func testRefund(t *testing.T, b Backend) {
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c, _, w := minuteWindow(t, b, alg)
			r, err := w.Hit(ctx, "k", 10, 5)
			require.NoError(t, err)
			require.True(t, r.Allowed)

			n, end, err := w.Refund(ctx, "k", 2)
			require.NoError(t, err)
			assert.Equal(t, int64(3), n)
			assert.True(t, end.Equal(r.ResetAt), "end %v, want the window's %v", end, r.ResetAt)
			got, err := w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(3), got)

			n, end, err = w.Refund(ctx, "k", 100)
			require.NoError(t, err)
			assert.Equal(t, int64(0), n, "never below zero")
			assert.True(t, end.Equal(r.ResetAt))
			exp, err := w.ExpiresAt(ctx, "k")
			require.NoError(t, err)
			assert.True(t, exp.Equal(r.ResetAt), "the window stays, with its end")
			r2, err := w.Hit(ctx, "k", 10, 10)
			require.NoError(t, err)
			assert.True(t, r2.Allowed, "the refunded room can be used again")
			assert.True(t, r2.ResetAt.Equal(r.ResetAt), "in the same window")

			// No window: nothing to give back, and none is opened.
			n, end, err = w.Refund(ctx, "absent", 1)
			require.NoError(t, err)
			assert.Equal(t, int64(0), n)
			assert.True(t, end.IsZero())
			exp, err = w.ExpiresAt(ctx, "absent")
			require.NoError(t, err)
			assert.True(t, exp.IsZero(), "a refund opened a window")

			// A window that has ended gets nothing back.
			c.Set(r.ResetAt)
			n, end, err = w.Refund(ctx, "k", 1)
			require.NoError(t, err)
			assert.Equal(t, int64(0), n)
			assert.True(t, end.IsZero())
			got, err = w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(0), got)
		})
	}
}

// minuteWindow opens fresh storage on a new Clock, 7 s past a FixedWindow
// boundary, and returns the clock, the store and a one-minute Window of alg.
func minuteWindow(t *testing.T, b Backend, alg ratedb.Algorithm) (*Clock, Store, ratedb.Limiter) {
	t.Helper()
	c := NewClock()
	s := open(t, b, c)
	w, err := s.Window(alg, time.Minute)
	require.NoError(t, err)
	c.Advance(7 * time.Second)
	return c, s, w
}

// testConcurrentRefunds hits one key from Handles handles (processes, for
// a networked backend) × Goroutines goroutines while every other allowed
// hit is refunded by the goroutine that made it. A refund follows its own
// hit, so the count is at least 1 when it lands and the floor at zero
// never applies: the count left must be exactly the hits allowed minus the
// refunds, and at most the limit. A refund built from a read and a write
// loses the hits that land between them and fails this.
func testConcurrentRefunds(t *testing.T, b Backend) {
	c := NewClock()
	handle := b.Open(t, c.Now)
	ws := make([]ratedb.Limiter, Handles)
	for i := range ws {
		w, err := handle().Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		ws[i] = w
	}
	const limit = 300
	var refunds atomic.Int64
	var calls atomic.Int64
	allowed := hammer(t, 8, func(h int) (bool, error) {
		r, err := ws[h].Hit(ctx, "shared", limit, 1)
		if err != nil || !r.Allowed {
			return false, err
		}
		if calls.Add(1)%2 == 0 {
			n, _, err := ws[h].Refund(ctx, "shared", 1)
			if err != nil {
				return true, err
			}
			if n < 0 || n >= limit {
				t.Errorf("count after a refund %d, want 0 <= n < %d", n, limit)
			}
			refunds.Add(1)
		}
		return true, nil
	})
	require.Positive(t, refunds.Load())
	got, err := ws[0].Get(ctx, "shared")
	require.NoError(t, err)
	assert.Equal(t, allowed-refunds.Load(), got, "allowed %d, refunded %d", allowed, refunds.Load())
	assert.LessOrEqual(t, got, int64(limit))
}

// testLayeredRefund checks Layered.Refund for each algorithm: every tier
// with an open window gets amount back, never below zero, and keeps its
// end; a tier whose window has ended gets nothing; counts come back in the
// order the tiers were given; a key without a window gets none opened.
func testLayeredRefund(t *testing.T, b Backend) {
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c := NewClock()
			// Given longest first: the answers follow this order.
			l, err := open(t, b, c).Layered(alg, ratedb.Tier{Scale: time.Hour, Limit: 10}, ratedb.Tier{Scale: time.Second, Limit: 5})
			require.NoError(t, err)
			c.Advance(7*time.Second + 100*time.Millisecond) // off the boundaries
			r, err := l.Hit(ctx, "k", 3)
			require.NoError(t, err)
			require.True(t, r.Allowed)
			ends, err := l.ExpiresAt(ctx, "k")
			require.NoError(t, err)

			counts, err := l.Refund(ctx, "k", 2)
			require.NoError(t, err)
			assert.Equal(t, []int64{1, 1}, counts)
			got, err := l.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, []int64{1, 1}, got)

			counts, err = l.Refund(ctx, "k", 5)
			require.NoError(t, err)
			assert.Equal(t, []int64{0, 0}, counts, "never below zero")
			after, err := l.ExpiresAt(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, ends, after, "no window's end moves")
			r, err = l.Hit(ctx, "k", 5)
			require.NoError(t, err)
			assert.True(t, r.Allowed, "the refunded room can be used again")
			assert.Equal(t, []int64{5, 5}, []int64{r.Tiers[0].Count, r.Tiers[1].Count})

			// The second's window ends; the hour's stays open.
			c.Advance(time.Second)
			counts, err = l.Refund(ctx, "k", 1)
			require.NoError(t, err)
			assert.Equal(t, []int64{4, 0}, counts, "an ended tier gets nothing back")
			got, err = l.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, []int64{4, 0}, got)

			// No window: nothing to give back, and none is opened.
			counts, err = l.Refund(ctx, "absent", 1)
			require.NoError(t, err)
			assert.Equal(t, []int64{0, 0}, counts)
			exp, err := l.ExpiresAt(ctx, "absent")
			require.NoError(t, err)
			assert.True(t, exp[0].IsZero() && exp[1].IsZero(), "a refund opened a window: %v", exp)

			_, err = l.Refund(ctx, "k", 0)
			assert.ErrorIs(t, err, ratedb.ErrInvalidArgument)
			_, err = l.Refund(ctx, "k", -1)
			assert.ErrorIs(t, err, ratedb.ErrInvalidArgument)
		})
	}
}

// testLayeredConcurrentRefunds is testConcurrentRefunds for a Layered
// limiter: every other allowed hit is refunded by the goroutine that made
// it, and each tier's count must be exactly the hits allowed minus the
// refunds.
func testLayeredConcurrentRefunds(t *testing.T, b Backend) {
	c := NewClock()
	handle := b.Open(t, c.Now)
	ls := make([]Layered, Handles)
	for i := range ls {
		l, err := handle().Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 300}, ratedb.Tier{Scale: time.Hour, Limit: 1000})
		require.NoError(t, err)
		ls[i] = l
	}
	var refunds, calls atomic.Int64
	allowed := hammer(t, 8, func(h int) (bool, error) {
		r, err := ls[h].Hit(ctx, "shared", 1)
		if err != nil || !r.Allowed {
			return false, err
		}
		if calls.Add(1)%2 == 0 {
			counts, err := ls[h].Refund(ctx, "shared", 1)
			if err != nil {
				return true, err
			}
			if counts[0] < 0 || counts[0] >= 300 {
				t.Errorf("minute count after a refund %d, want 0 <= n < 300", counts[0])
			}
			refunds.Add(1)
		}
		return true, nil
	})
	require.Positive(t, refunds.Load())
	got, err := ls[0].Get(ctx, "shared")
	require.NoError(t, err)
	want := allowed - refunds.Load()
	assert.Equal(t, []int64{want, want}, got, "allowed %d, refunded %d", allowed, refunds.Load())
	assert.LessOrEqual(t, got[0], int64(300))
}
