package limitertest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
)

// testUndo checks Window.Undo for each algorithm: it takes a hit back from
// the window it counted in, never below zero; it leaves alone a window
// opened after that one ended; a denied Result undoes nothing; it opens no
// window; and it rejects what is not the Result of a hit of that Window.
func testUndo(t *testing.T, b Backend) {
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c, s, w := minuteWindow(t, b, alg)
			hourly, err := s.Window(alg, time.Hour)
			require.NoError(t, err)
			fromHourly, err := hourly.Hit(ctx, "k", 10, 1)
			require.NoError(t, err)
			first, err := w.Hit(ctx, "k", 10, 2)
			require.NoError(t, err)
			second, err := w.Hit(ctx, "k", 10, 5)
			require.NoError(t, err)
			require.True(t, second.Allowed)

			require.NoError(t, w.Undo(ctx, "k", second, 5))
			n, err := w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(2), n, "the undone hit's 5 are given back")
			exp, err := w.ExpiresAt(ctx, "k")
			require.NoError(t, err)
			assert.True(t, exp.Equal(first.ResetAt), "the window keeps its end")

			require.NoError(t, w.Undo(ctx, "k", first, 7))
			n, err = w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(0), n, "never below zero")

			denied, err := w.Hit(ctx, "k", 10, 11)
			require.NoError(t, err)
			require.False(t, denied.Allowed)
			_, err = w.Hit(ctx, "k", 10, 4)
			require.NoError(t, err)
			require.NoError(t, w.Undo(ctx, "k", denied, 11), "a denied hit counted nothing")
			n, err = w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(4), n, "undoing a denied hit gives nothing back")

			// The window the hit counted in has ended and a new one is
			// open: the new one is not touched.
			c.Set(first.ResetAt)
			next, err := w.Hit(ctx, "k", 10, 3)
			require.NoError(t, err)
			require.True(t, next.ResetAt.After(first.ResetAt))
			require.NoError(t, w.Undo(ctx, "k", first, 2))
			n, err = w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(3), n, "an undo gave back room in a later window")

			// No window: none is opened.
			require.NoError(t, w.Undo(ctx, "absent", next, 1))
			exp, err = w.ExpiresAt(ctx, "absent")
			require.NoError(t, err)
			assert.True(t, exp.IsZero(), "an undo opened a window")

			for name, bad := range map[string]struct {
				r   ratedb.Result
				inc int64
			}{
				"zero increment":     {next, 0},
				"negative increment": {next, -1},
				"no end":             {ratedb.Result{Allowed: true, Scale: time.Minute}, 1},
				"a Layered result":   {ratedb.Result{Allowed: true, ResetAt: next.ResetAt, Scale: time.Minute, Tiers: []ratedb.TierResult{{Scale: time.Minute, ResetAt: next.ResetAt}}}, 1},
				"another Window's":   {fromHourly, 1},
			} {
				assert.ErrorIs(t, w.Undo(ctx, "k", bad.r, bad.inc), ratedb.ErrInvalidArgument, name)
			}
			n, err = w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, int64(3), n, "a rejected undo changed the count")
		})
	}
}

// testLayeredUndo checks Layered.Undo: every tier whose window is the one
// the hit counted in gets the increment back, a tier whose window has
// rolled over since is left alone, and a Result of another limiter is
// rejected.
func testLayeredUndo(t *testing.T, b Backend) {
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			c := NewClock()
			s := open(t, b, c)
			// Given longest first: the answers follow this order.
			l, err := s.Layered(alg, ratedb.Tier{Scale: time.Hour, Limit: 10}, ratedb.Tier{Scale: time.Second, Limit: 5})
			require.NoError(t, err)
			c.Advance(7*time.Second + 100*time.Millisecond) // off the boundaries
			_, err = l.Hit(ctx, "k", 1)
			require.NoError(t, err)
			r, err := l.Hit(ctx, "k", 3)
			require.NoError(t, err)
			require.True(t, r.Allowed)
			require.NoError(t, l.Undo(ctx, "k", r, 3))
			got, err := l.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, []int64{1, 1}, got, "both tiers give the hit back")

			r, err = l.Hit(ctx, "k", 4)
			require.NoError(t, err)
			require.True(t, r.Allowed)
			// The second's window rolls over and counts anew.
			c.Advance(time.Second)
			_, err = l.Hit(ctx, "k", 2)
			require.NoError(t, err)
			require.NoError(t, l.Undo(ctx, "k", r, 4))
			got, err = l.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, []int64{3, 2}, got, "only the hour's window is the one the hit counted in")

			denied, err := l.Hit(ctx, "k", 6)
			require.NoError(t, err)
			require.False(t, denied.Allowed)
			require.NoError(t, l.Undo(ctx, "k", denied, 6))
			got, err = l.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, []int64{3, 2}, got, "undoing a denied hit gives nothing back")

			other, err := s.Layered(alg, ratedb.Tier{Scale: time.Hour, Limit: 10}, ratedb.Tier{Scale: time.Minute, Limit: 5})
			require.NoError(t, err)
			fromOther, err := other.Hit(ctx, "k", 1)
			require.NoError(t, err)
			w, err := s.Window(alg, time.Hour)
			require.NoError(t, err)
			fromWindow, err := w.Hit(ctx, "k", 10, 1)
			require.NoError(t, err)
			assert.ErrorIs(t, l.Undo(ctx, "k", fromOther, 1), ratedb.ErrInvalidArgument, "another limiter's tiers")
			assert.ErrorIs(t, l.Undo(ctx, "k", fromWindow, 1), ratedb.ErrInvalidArgument, "a Window's result")
			assert.ErrorIs(t, l.Undo(ctx, "k", r, 0), ratedb.ErrInvalidArgument, "zero increment")
			got, err = l.Get(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, []int64{3, 2}, got, "a rejected undo changed the counts")
		})
	}
}

// testConcurrentUndo hits one key from every handle while every other
// allowed hit is undone by the goroutine that made it, on a Window and on
// a Layered limiter: the count left must be exactly the hits allowed minus
// the undone ones. An undo built from a read and a write loses the hits
// that land between them and fails this.
func testConcurrentUndo(t *testing.T, b Backend) {
	c := NewClock()
	handle := b.Open(t, c.Now)
	ws := make([]ratedb.Limiter, Handles)
	ls := make([]Layered, Handles)
	for i := range ws {
		s := handle()
		w, err := s.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		// Room for every attempt: the Window's limit alone decides (the
		// Layered count runs ahead of the Window's while an undo is
		// halfway done).
		l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 10_000}, ratedb.Tier{Scale: time.Hour, Limit: 20_000})
		require.NoError(t, err)
		ws[i], ls[i] = w, l
	}
	var undone, calls atomic.Int64
	allowed := hammer(t, 8, func(h int) (bool, error) {
		r, err := ws[h].Hit(ctx, "w", 300, 1)
		if err != nil || !r.Allowed {
			return false, err
		}
		lr, err := ls[h].Hit(ctx, "l", 1)
		if err != nil {
			return true, err
		}
		if !lr.Allowed {
			t.Errorf("the Layered limiter denied a hit the Window allowed")
		}
		if calls.Add(1)%2 == 0 {
			if err := ws[h].Undo(ctx, "w", r, 1); err != nil {
				return true, err
			}
			if err := ls[h].Undo(ctx, "l", lr, 1); err != nil {
				return true, err
			}
			undone.Add(1)
		}
		return true, nil
	})
	require.Positive(t, undone.Load())
	want := allowed - undone.Load()
	got, err := ws[0].Get(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, want, got, "Window: allowed %d, undone %d", allowed, undone.Load())
	lgot, err := ls[0].Get(ctx, "l")
	require.NoError(t, err)
	assert.Equal(t, []int64{want, want}, lgot, "Layered: allowed %d, undone %d", allowed, undone.Load())
}
