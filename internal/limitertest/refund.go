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
	for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			c := NewClock()
			s := open(t, b, c)
			w, err := s.Window(alg, time.Minute)
			require.NoError(t, err)
			c.Advance(7 * time.Second) // off a FixedWindow boundary
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
