package ratedb_test

import (
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The clock model (clock.go, doc.go, README "Clock"): an injected clock is
// taken as given; whatever it does, a window never ends more than one scale
// after now (a later end is capped when the window is read), so a key is
// never denied for more than one scale past the moment it would be allowed
// on a correct clock, and a step back never reopens a window early. These
// tests drive each glitch case of the table with an injected clock; the
// default clock, which runs on the monotonic clock, is tested in
// clock_internal_test.go.

// clockCase opens a file-backed DB on clock c and returns a hit function on
// a one-minute window of alg with limit 1, and a restart function.
type clockCase struct {
	t    *testing.T
	c    *fakeClock
	path string
	db   *ratedb.DB
	alg  ratedb.Algorithm
	w    *ratedb.Window
}

func newClockCase(t *testing.T, alg ratedb.Algorithm) *clockCase {
	cc := &clockCase{t: t, c: newClock(), path: tempPath(t), alg: alg}
	cc.c.Advance(50 * time.Second) // 10 s before a minute boundary
	cc.open()
	return cc
}

func (cc *clockCase) open() {
	cc.db = openDB(cc.t, cc.path, testOptions(cc.c))
	w, err := cc.db.Window(cc.alg, time.Minute)
	require.NoError(cc.t, err)
	cc.w = w
}

func (cc *clockCase) restart() {
	require.NoError(cc.t, cc.db.Close())
	cc.open()
}

func (cc *clockCase) hit(key string) ratedb.Result {
	cc.t.Helper()
	r, err := cc.w.Hit(ctx, key, 1, 1)
	require.NoError(cc.t, err)
	if !r.Allowed {
		assert.LessOrEqual(cc.t, r.RetryAfter, time.Minute, "(b): denied for more than one scale")
		assert.False(cc.t, r.ResetAt.After(cc.c.Now().Add(time.Minute)), "(b): a window ends more than one scale after now")
	}
	return r
}

var clockAlgs = []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow}

// A step back, in process or across a restart: the full window is capped to
// end one scale after the new now, keeping its count, so the key is denied
// for exactly one scale (never reopened early, never held longer).
func TestClockStepBack(t *testing.T) {
	for _, restart := range []bool{false, true} {
		for _, alg := range clockAlgs {
			t.Run(alg.String()+map[bool]string{false: "/in-process", true: "/restart"}[restart], func(t *testing.T) {
				cc := newClockCase(t, alg)
				require.True(t, cc.hit("k").Allowed)
				cc.c.Advance(-time.Hour)
				if restart {
					cc.restart()
				}
				r := cc.hit("k")
				assert.False(t, r.Allowed, "(a): a step back reopened the window")
				assert.Equal(t, time.Minute, r.RetryAfter)
				n, err := cc.w.Get(ctx, "k")
				require.NoError(t, err)
				assert.Equal(t, int64(1), n)
				cc.c.Advance(time.Minute - time.Millisecond)
				assert.False(t, cc.hit("k").Allowed)
				cc.c.Advance(time.Millisecond)
				assert.True(t, cc.hit("k").Allowed, "(b): still denied one scale after the step")
			})
		}
	}
}

// A forward glitch of an injected clock for a single call, in process or
// persisted across a restart: keys the glitched call did not touch keep
// their windows and reopen on time; the window the glitched call opened is
// capped, when read on the corrected clock, to end within one scale. Before
// the fix the DB held its time at the glitched reading (and saved it in the
// file), so every key at its limit stayed denied for a day.
func TestClockForwardGlitch(t *testing.T) {
	for _, restart := range []bool{false, true} {
		for _, alg := range clockAlgs {
			t.Run(alg.String()+map[bool]string{false: "/in-process", true: "/restart"}[restart], func(t *testing.T) {
				cc := newClockCase(t, alg)
				a := cc.hit("a")
				require.True(t, a.Allowed)
				correct := cc.c.Now()
				cc.c.Advance(24 * time.Hour) // one call reads a day ahead
				require.True(t, cc.hit("b").Allowed)
				cc.c.Set(correct.Add(time.Millisecond)) // and the clock corrects itself
				if restart {
					cc.restart()
				}
				r := cc.hit("a")
				assert.False(t, r.Allowed)
				assert.True(t, r.ResetAt.Equal(a.ResetAt), "a's window is untouched by the glitch")
				end, err := cc.w.ExpiresAt(ctx, "b")
				require.NoError(t, err)
				assert.False(t, end.After(cc.c.Now().Add(time.Minute)), "ExpiresAt reports the capped end")
				r = cc.hit("b")
				assert.False(t, r.Allowed, "b keeps the count of the window the glitched call opened")

				cc.c.Set(a.ResetAt)
				assert.True(t, cc.hit("a").Allowed, "(b): a is still denied after its window ended")
				cc.c.Set(correct.Add(time.Minute + time.Millisecond))
				assert.True(t, cc.hit("b").Allowed, "(b): b is still denied one scale after the correction")
			})
		}
	}
}

// A janitor pass that reads a glitched (ahead) time counts as a glitched
// call for every window it removes (the README's clock table): such a key
// starts a fresh window once the clock corrects, where a key the pass left
// alone keeps its count.
func TestClockForwardGlitchOfTheJanitor(t *testing.T) {
	for _, alg := range clockAlgs {
		t.Run(alg.String(), func(t *testing.T) {
			cc := newClockCase(t, alg)
			a := cc.hit("a")
			require.True(t, a.Allowed)
			require.NoError(t, cc.db.Snapshot())
			correct := cc.c.Now()
			cc.c.Advance(24 * time.Hour) // the janitor's reading is a day ahead
			removed, err := cc.db.Clean()
			require.NoError(t, err)
			assert.Equal(t, 1, removed, "the glitched pass removed a's window")
			cc.c.Set(correct.Add(time.Millisecond))
			require.True(t, cc.hit("a").Allowed, "a starts a fresh window, as after a glitched call")
			assert.False(t, cc.hit("a").Allowed, "and counts in it")
			b := cc.hit("b")
			require.True(t, b.Allowed)
			assert.False(t, cc.hit("b").Allowed, "a key the pass did not remove is unaffected")
		})
	}
}

// Layered limiters follow the same model, tier by tier.
func TestClockLayeredStepBack(t *testing.T) {
	c := newClock()
	db := openDB(t, tempPath(t), testOptions(c))
	l, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 1}, ratedb.Tier{Scale: time.Hour, Limit: 5})
	require.NoError(t, err)
	r, err := l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	c.Advance(-24 * time.Hour)
	r, err = l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed)
	assert.Equal(t, time.Minute, r.RetryAfter)
	assert.True(t, r.Tiers[1].ResetAt.Equal(c.Now().Add(time.Hour)), "the hour tier is capped to one hour")
	c.Advance(time.Minute)
	r, err = l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	assert.Equal(t, int64(2), r.Tiers[1].Count, "the hour tier kept its count")
}

// Bug 5 of issue 9: clocks before 1970 gave wrong answers (End 0 means "no
// window"). Readings outside [1970-01-01, 10000-01-01) are refused with
// ErrClockOutOfRange; both edges of the range work and persist.
func TestClockRange(t *testing.T) {
	minT := time.Unix(0, 0)
	maxT := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{minT.Add(-time.Millisecond), time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), maxT, maxT.Add(time.Hour)} {
		c := newClock()
		c.Set(at)
		db := openDB(t, tempPath(t), testOptions(c))
		w, err := db.Window(ratedb.FixedWindow, time.Second)
		require.NoError(t, err)
		_, err = w.Hit(ctx, "k", 1, 1)
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Hit at %v", at)
		_, err = w.Get(ctx, "k")
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Get at %v", at)
		_, err = w.Inc(ctx, "k", 1)
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Inc at %v", at)
		_, err = db.Clean()
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Clean at %v", at)
		assert.Zero(t, db.Stats().WindowsInMemory, "a refused call changes nothing")
	}
	for _, at := range []time.Time{minT, maxT.Add(-time.Millisecond)} {
		c := newClock()
		c.Set(at)
		path := tempPath(t)
		db := openDB(t, path, testOptions(c))
		w, err := db.Window(ratedb.FixedWindow, time.Second)
		require.NoError(t, err)
		r, err := w.Hit(ctx, "k", 2, 1)
		require.NoError(t, err, "at %v", at)
		assert.True(t, r.Allowed)
		assert.True(t, r.ResetAt.After(at))
		assert.LessOrEqual(t, r.ResetAt.Sub(at), time.Second)
		require.NoError(t, db.Close())
		db = openDB(t, path, testOptions(c))
		w, err = db.Window(ratedb.FixedWindow, time.Second)
		require.NoError(t, err)
		n, err := w.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "the window at %v survives a restart", at)
	}
}

// README: a clock reading out of range is "refused with ErrClockOutOfRange
// (... by each call for an injected one), and the call changes nothing".
// Reset did not read the clock: it cleared the window anyway.
func TestResetRefusesAClockOutOfRange(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		c := newClock()
		db := openDB(t, path, testOptions(c))
		w, err := db.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		l, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5})
		require.NoError(t, err)

		_, err = w.Hit(ctx, "k", 5, 1)
		require.NoError(t, err)
		_, err = l.Hit(ctx, "k", 1)
		require.NoError(t, err)

		good := c.Now()
		c.Set(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))
		assert.ErrorIs(t, w.Reset(ctx, "k"), ratedb.ErrClockOutOfRange)
		assert.ErrorIs(t, l.Reset(ctx, "k"), ratedb.ErrClockOutOfRange)

		c.Set(good)
		n, err := w.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "the refused Reset cleared the window")
		ns, err := l.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, []int64{1}, ns, "the refused Reset cleared the layered window")
	})
}

// A Reset, then a step back, then a janitor pass: the entry holding the
// reset (and the window opened after it) ends earlier than the record still
// in the file. Before the fix the pass let it leave memory before a snapshot
// had written it, and the next read brought the reset window back from the
// file (found by TestModel, seed 550). The times stay within one second, one
// slot of the janitor's expiry index, as in that seed.
func TestClockStepBackAfterResetKeepsTheReset(t *testing.T) {
	for _, alg := range clockAlgs {
		t.Run(alg.String(), func(t *testing.T) {
			c := newClock()
			path := tempPath(t)
			db := openDB(t, path, testOptions(c))
			w, err := db.Window(alg, 100*time.Millisecond)
			require.NoError(t, err)
			c.Advance(150 * time.Millisecond)
			r1, err := w.Hit(ctx, "k", 1, 1)
			require.NoError(t, err)
			require.True(t, r1.Allowed)
			require.NoError(t, db.Snapshot()) // the file holds the window
			require.NoError(t, w.Reset(ctx, "k"))
			c.Advance(-100 * time.Millisecond) // one scale back
			r2, err := w.Hit(ctx, "k", 1, 1)
			require.NoError(t, err)
			require.True(t, r2.Allowed, "the window was reset")
			require.True(t, r2.ResetAt.Before(r1.ResetAt))
			c.Set(r2.ResetAt) // the window opened after the step back has ended
			_, err = db.Clean()
			require.NoError(t, err)
			n, err := w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Zero(t, n, "the reset window came back from the file")

			require.NoError(t, db.Snapshot())
			_, err = db.Clean()
			require.NoError(t, err)
			require.NoError(t, db.Close())
			db = openDB(t, path, testOptions(c))
			w, err = db.Window(alg, 100*time.Millisecond)
			require.NoError(t, err)
			n, err = w.Get(ctx, "k")
			require.NoError(t, err)
			assert.Zero(t, n, "the reset window came back after a restart")
		})
	}
}

// A call refused for its clock reading reads no window back: Stats.Reloaded
// counts a window read from the file once, by the call that keeps it.
func TestRefusedCallReloadsNothing(t *testing.T) {
	c := newClock()
	path := tempPath(t)
	db := openDB(t, path, testOptions(c))
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	_, err = w.Hit(ctx, "k", 5, 1)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	db = openDB(t, path, testOptions(c))
	w, err = db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	good := c.Now()
	c.Set(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))
	_, err = w.Hit(ctx, "k", 5, 1)
	require.ErrorIs(t, err, ratedb.ErrClockOutOfRange)
	assert.Zero(t, db.Stats().Reloaded, "the refused call kept nothing it read")
	c.Set(good)
	r, err := w.Hit(ctx, "k", 5, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Count)
	assert.Equal(t, int64(1), db.Stats().Reloaded)
}

// A reading so far from 1970 that its Unix milliseconds do not fit in an
// int64 is out of range too: time.Time.UnixMilli wraps for it, and these
// two readings (in the years 584,556,019 and -584,552,051) wrap to
// 1970-01-01T00:00:00.384Z and .616Z, which were taken as valid readings.
func TestClockRangeBeyondUnixMilli(t *testing.T) {
	for _, at := range []time.Time{
		time.Unix(18_446_744_073_709_552, 0),  // UnixMilli wraps to 384
		time.Unix(-18_446_744_073_709_551, 0), // UnixMilli wraps to 616
	} {
		c := newClock()
		c.Set(at)
		db := openDB(t, tempPath(t), testOptions(c))
		w, err := db.Window(ratedb.FixedWindow, time.Second)
		require.NoError(t, err)
		_, err = w.Hit(ctx, "k", 1, 1)
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Hit at Unix %d (UnixMilli %d)", at.Unix(), at.UnixMilli())
		_, err = db.Clean()
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Clean at Unix %d", at.Unix())
		assert.Zero(t, db.Stats().WindowsInMemory, "a refused call changes nothing")
	}
}
