package ratedb

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWindowArithmetic(t *testing.T) {
	cases := []struct {
		name            string
		now, scale, off int64
		fixed, stagger  int64
	}{
		{"start of window", 60_000, 60_000, 0, 120_000, 120_000},
		{"inside window", 61_234, 60_000, 0, 120_000, 120_000},
		{"last ms", 119_999, 60_000, 0, 120_000, 120_000},
		{"offset shifts boundaries", 61_234, 60_000, 1_500, 120_000, 61_500}, {"past the shifted boundary", 61_600, 60_000, 1_500, 120_000, 121_500},
		{"before the offset", 1_000, 60_000, 1_500, 60_000, 1_500},
		{"negative time", -1, 1_000, 0, 0, 0},
		{"negative time, offset", -1, 1_000, 999, 0, 999}, {"negative time, before offset", -2, 1_000, 999, 0, -1},
		{"scale 1ms", 42, 1, 0, 43, 43},
	}
	for _, c := range cases {
		if got := fixedEnd(c.now, c.scale); got != c.fixed {
			t.Errorf("%s: fixedEnd = %d, want %d", c.name, got, c.fixed)
		}
		if got := staggeredEnd(c.now, c.scale, c.off); got != c.stagger {
			t.Errorf("%s: staggeredEnd = %d, want %d", c.name, got, c.stagger)
		}
	}
	if got := perKeyEnd(1000, 250); got != 1250 {
		t.Errorf("perKeyEnd = %d", got)
	}
}

// TestStaggerOffsetStable pins the offsets: they are persisted implicitly (a
// key's window boundaries must not move across restarts, versions or
// machines), so a change here is a breaking change.
func TestStaggerOffsetStable(t *testing.T) {
	// Values computed independently (64-bit FNV-1a of the key, modulo the
	// scale in milliseconds).
	cases := []struct {
		key   string
		scale int64
		want  int64
	}{
		{"", 60_000, 16037},
		{"a", 60_000, 1996},
		{"user:1", 60_000, 19947},
		{"203.0.113.7", 60_000, 31968},
		{"user:1", 3_600_000, 979947},
		{"203.0.113.7", 3_600_000, 2191968},
	}
	for _, c := range cases {
		if got := staggerOffset(c.key, c.scale); got != c.want {
			t.Errorf("staggerOffset(%q, %d) = %d, want %d", c.key, c.scale, got, c.want)
		}
	}
}

// FuzzWindowArithmetic checks the invariants of the pure window functions:
// the window [end-scale, end) contains now, ends are aligned as promised, and
// nothing overflows within the clamped time range.
func FuzzWindowArithmetic(f *testing.F) {
	f.Add(int64(1_767_225_600_123), int64(60_000), "user")
	f.Add(int64(-5), int64(7), "")
	f.Add(maxTime, maxScaleMillis, "k")
	f.Add(minTime, int64(1), "k")
	f.Fuzz(func(t *testing.T, now, scale int64, key string) {
		now = min(max(now, minTime), maxTime)
		if scale < 1 || scale > maxScaleMillis {
			return
		}
		check := func(name string, end int64) {
			if !(end-scale <= now && now < end) {
				t.Fatalf("%s: now %d not in [%d, %d)", name, now, end-scale, end)
			}
		}
		fe := fixedEnd(now, scale)
		check("fixed", fe)
		if floorMod(fe, scale) != 0 {
			t.Fatalf("fixed end %d not a multiple of %d", fe, scale)
		}
		off := staggerOffset(key, scale)
		if off < 0 || off >= scale {
			t.Fatalf("offset %d out of [0, %d)", off, scale)
		}
		se := staggeredEnd(now, scale, off)
		check("staggered", se)
		if floorMod(se-off, scale) != 0 {
			t.Fatalf("staggered end %d not offset %d from a multiple of %d", se, off, scale)
		}
		check("perkey", perKeyEnd(now, scale))
	})
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// Undo takes only from the window the hit counted in, even when that window
// ends, and the key's next window opens, between Undo's look at the key and
// its update: the next window (which ends later) keeps its count.
func TestUndoDoesNotTakeFromTheNextWindow(t *testing.T) {
	t0 := time.UnixMilli(1_767_225_600_000)
	clk := &settableClock{t: t0}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	w, err := db.Window(FixedWindow, time.Minute)
	require.NoError(t, err)
	r, err := w.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	var next Result
	setHook(t, func() { // runs as Undo acquires the key, after its look
		testBeforeAcquire = nil
		clk.Set(r.ResetAt) // the hit's window has ended
		next, err = w.Hit(ctx, "k", 10, 1)
	})
	require.NoError(t, w.Undo(ctx, "k", r, 1))
	require.NoError(t, err)
	require.True(t, next.ResetAt.After(r.ResetAt), "the hook's hit did not open the next window")
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the next window's count after an undo of a hit of the window before")
}

// A Refund whose key's window ends between Refund's look at the key and its
// update, exactly at the instant of the update, finds no current window
// (a window [start, end) has ended at end): it gives nothing back and
// returns 0 and the zero Time, and for a Layered limiter a count of 0 for
// every tier whose window ended so, as for a key with no window.
func TestRefundOfAWindowThatEndsAsItUpdates(t *testing.T) {
	t0 := time.UnixMilli(1_767_225_600_000)
	ctx := context.Background()
	open := func(t *testing.T) (*DB, *settableClock) {
		clk := &settableClock{t: t0}
		db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return db, clk
	}
	t.Run("window", func(t *testing.T) {
		db, clk := open(t)
		w, err := db.Window(FixedWindow, time.Minute)
		require.NoError(t, err)
		r, err := w.Hit(ctx, "k", 10, 3)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		setHook(t, func() { // runs as Refund acquires the key, after its look
			testBeforeAcquire = nil
			clk.Set(r.ResetAt)
		})
		n, end, err := w.Refund(ctx, "k", 1)
		require.NoError(t, err)
		assert.Zero(t, n, "count returned by a refund of a window that ended at its update")
		assert.True(t, end.IsZero(), "end returned by a refund of a window that ended at its update: %v", end)
	})
	t.Run("layered", func(t *testing.T) {
		db, clk := open(t)
		l, err := db.Layered(FixedWindow, Tier{Scale: time.Minute, Limit: 10}, Tier{Scale: time.Hour, Limit: 100})
		require.NoError(t, err)
		r, err := l.Hit(ctx, "k", 3)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		setHook(t, func() { // the minute tier's window ends; the hour's is open
			testBeforeAcquire = nil
			clk.Set(r.Tiers[0].ResetAt)
		})
		counts, err := l.Refund(ctx, "k", 1)
		require.NoError(t, err)
		assert.Equal(t, []int64{0, 2}, counts, "a refund as the minute tier's window ends")
	})
}
