package limitertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/limits"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// step is one operation of a table test, run after advancing the clock.
type step struct {
	advance time.Duration
	op      string // "hit", "inc", "set", "get", "expires", "reset"
	arg     int64  // increment for hit/inc, count for set

	allowed   bool          // hit
	count     int64         // hit, inc, set, get: count after the call
	resetAt   time.Duration // hit, expires: window end as an offset from Epoch (0: zero Time for expires)
	retry     time.Duration // hit
	remaining int64         // hit
}

func runSteps(t *testing.T, w ratedb.Limiter, c *Clock, key string, limit int64, steps []step) {
	t.Helper()
	for i, s := range steps {
		c.Advance(s.advance)
		name := fmt.Sprintf("step %d (%s at +%v)", i, s.op, c.Now().Sub(Epoch))
		switch s.op {
		case "hit":
			r, err := w.Hit(ctx, key, limit, s.arg)
			require.NoError(t, err, name)
			assert.Equal(t, s.allowed, r.Allowed, name)
			assert.Equal(t, s.count, r.Count, name)
			assert.Equal(t, limit, r.Limit, name)
			assert.Equal(t, s.remaining, r.Remaining, name)
			assert.True(t, Epoch.Add(s.resetAt).Equal(r.ResetAt), "%s: ResetAt %v, want +%v", name, r.ResetAt.Sub(Epoch), s.resetAt)
			assert.Equal(t, s.retry, r.RetryAfter, name)
			assert.Equal(t, w.Scale(), r.Scale, name)
			assert.Zero(t, r.Tier, name)
			assert.Nil(t, r.Tiers, name)
		case "inc":
			n, err := w.Inc(ctx, key, s.arg)
			require.NoError(t, err, name)
			assert.Equal(t, s.count, n, name)
		case "set":
			n, err := w.Set(ctx, key, s.arg)
			require.NoError(t, err, name)
			assert.Equal(t, s.count, n, name)
		case "get":
			n, err := w.Get(ctx, key)
			require.NoError(t, err, name)
			assert.Equal(t, s.count, n, name)
		case "expires":
			at, err := w.ExpiresAt(ctx, key)
			require.NoError(t, err, name)
			if s.resetAt == 0 {
				assert.True(t, at.IsZero(), "%s: ExpiresAt %v, want zero", name, at)
			} else {
				assert.True(t, Epoch.Add(s.resetAt).Equal(at), "%s: ExpiresAt +%v, want +%v", name, at.Sub(Epoch), s.resetAt)
			}
		case "reset":
			require.NoError(t, w.Reset(ctx, key), name)
		default:
			t.Fatalf("unknown op %q", s.op)
		}
	}
}

// staggerKey is the key of the StaggeredWindow case, whose steps are
// written relative to its offset (internal/limits.StaggerOffset).
const staggerKey = "k-staggered"

func testAlgorithms(t *testing.T, b Backend) {
	const m = time.Minute
	off := time.Duration(limits.StaggerOffset(staggerKey, m.Milliseconds())) * time.Millisecond
	tests := []struct {
		name  string
		alg   ratedb.Algorithm
		key   string
		start time.Duration // clock offset from Epoch before the first step
		limit int64
		steps []step
	}{
		{
			name: "fixed/allow up to the limit then deny", alg: ratedb.FixedWindow, start: 10 * time.Second, limit: 3,
			steps: []step{
				{op: "hit", arg: 1, allowed: true, count: 1, remaining: 2, resetAt: m},
				{op: "hit", arg: 1, allowed: true, count: 2, remaining: 1, resetAt: m},
				{op: "hit", arg: 1, allowed: true, count: 3, remaining: 0, resetAt: m},
				{advance: 5 * time.Second, op: "hit", arg: 1, allowed: false, count: 3, remaining: 0, resetAt: m, retry: 45 * time.Second},
				{op: "get", count: 3},
				{op: "expires", resetAt: m},
			},
		},
		{
			name: "fixed/rollover at the aligned boundary", alg: ratedb.FixedWindow, start: 59 * time.Second, limit: 2,
			steps: []step{
				{op: "hit", arg: 2, allowed: true, count: 2, remaining: 0, resetAt: m},
				{op: "hit", arg: 1, allowed: false, count: 2, resetAt: m, retry: time.Second},
				{advance: 999 * time.Millisecond, op: "hit", arg: 1, allowed: false, count: 2, resetAt: m, retry: time.Millisecond},
				{advance: time.Millisecond, op: "get", count: 0},
				{op: "expires", resetAt: 0},
				{op: "hit", arg: 1, allowed: true, count: 1, remaining: 1, resetAt: 2 * m},
			},
		},
		{
			name: "fixed/denied hit consumes nothing", alg: ratedb.FixedWindow, limit: 5,
			steps: []step{
				{op: "hit", arg: 4, allowed: true, count: 4, remaining: 1, resetAt: m},
				{op: "hit", arg: 2, allowed: false, count: 4, remaining: 1, resetAt: m, retry: m},
				{op: "hit", arg: 2, allowed: false, count: 4, remaining: 1, resetAt: m, retry: m},
				{op: "hit", arg: 1, allowed: true, count: 5, remaining: 0, resetAt: m},
			},
		},
		{
			name: "fixed/increment above the limit never fits", alg: ratedb.FixedWindow, limit: 2,
			steps: []step{
				{op: "hit", arg: 3, allowed: false, count: 0, remaining: 2, resetAt: m, retry: m},
				{op: "hit", arg: 1 << 62, allowed: false, count: 0, remaining: 2, resetAt: m, retry: m},
				{op: "expires", resetAt: 0},
			},
		},
		{
			name: "fixed/limit zero denies everything", alg: ratedb.FixedWindow, start: 30 * time.Second, limit: 0,
			steps: []step{
				{op: "hit", arg: 1, allowed: false, count: 0, remaining: 0, resetAt: m, retry: 30 * time.Second},
			},
		},
		{
			name: "fixed/inc set get reset", alg: ratedb.FixedWindow, start: 20 * time.Second, limit: 10,
			steps: []step{
				{op: "get", count: 0},
				{op: "inc", arg: 4, count: 4},
				{op: "inc", arg: 20, count: 24}, // no limit check
				{op: "hit", arg: 1, allowed: false, count: 24, remaining: 0, resetAt: m, retry: 40 * time.Second},
				{op: "set", arg: 7, count: 7},
				{op: "expires", resetAt: m},
				{op: "hit", arg: 3, allowed: true, count: 10, remaining: 0, resetAt: m},
				{op: "reset"},
				{op: "get", count: 0},
				{op: "expires", resetAt: 0},
				{op: "hit", arg: 1, allowed: true, count: 1, remaining: 9, resetAt: m},
				{advance: 40 * time.Second, op: "set", arg: 2, count: 2}, // Set opens the current window
				{op: "expires", resetAt: 2 * m},
				{op: "set", arg: 0, count: 0},
				{op: "expires", resetAt: 2 * m},
			},
		},
		{
			name: "perkey/window starts at the first hit", alg: ratedb.PerKeyWindow, start: 10 * time.Second, limit: 2,
			steps: []step{
				{op: "expires", resetAt: 0},
				{op: "hit", arg: 1, allowed: true, count: 1, remaining: 1, resetAt: 70 * time.Second},
				{advance: 55 * time.Second, op: "hit", arg: 1, allowed: true, count: 2, remaining: 0, resetAt: 70 * time.Second},
				{op: "hit", arg: 1, allowed: false, count: 2, remaining: 0, resetAt: 70 * time.Second, retry: 5 * time.Second},
				{advance: 5 * time.Second, op: "get", count: 0},
				{op: "hit", arg: 1, allowed: true, count: 1, remaining: 1, resetAt: 130 * time.Second},
				{op: "expires", resetAt: 130 * time.Second},
			},
		},
		{
			name: "perkey/denied hit opens no window", alg: ratedb.PerKeyWindow, start: 10 * time.Second, limit: 0,
			steps: []step{
				{op: "hit", arg: 1, allowed: false, count: 0, remaining: 0, resetAt: 70 * time.Second, retry: m},
				{op: "expires", resetAt: 0},
			},
		},
		{
			name: "perkey/set restarts the window at now", alg: ratedb.PerKeyWindow, start: 0, limit: 5,
			steps: []step{
				{op: "hit", arg: 3, allowed: true, count: 3, remaining: 2, resetAt: m},
				{advance: 30 * time.Second, op: "set", arg: 1, count: 1},
				{op: "expires", resetAt: 90 * time.Second},
				{op: "inc", arg: 2, count: 3},
				{advance: 59 * time.Second, op: "hit", arg: 2, allowed: true, count: 5, remaining: 0, resetAt: 90 * time.Second},
				{advance: time.Second, op: "hit", arg: 5, allowed: true, count: 5, remaining: 0, resetAt: 150 * time.Second},
				{op: "reset"},
				{op: "expires", resetAt: 0},
			},
		},
		{
			name: "staggered/windows shifted by the key's offset", alg: ratedb.StaggeredWindow, key: staggerKey, start: off - time.Second, limit: 2,
			steps: []step{
				{op: "hit", arg: 2, allowed: true, count: 2, remaining: 0, resetAt: off},
				{op: "hit", arg: 1, allowed: false, count: 2, remaining: 0, resetAt: off, retry: time.Second},
				{op: "expires", resetAt: off},
				{advance: time.Second, op: "get", count: 0},
				{op: "hit", arg: 1, allowed: true, count: 1, remaining: 1, resetAt: off + m},
				{advance: 59 * time.Second, op: "set", arg: 2, count: 2},
				{op: "expires", resetAt: off + m},
				{op: "hit", arg: 1, allowed: false, count: 2, remaining: 0, resetAt: off + m, retry: time.Second},
				{advance: time.Second, op: "inc", arg: 1, count: 1},
				{op: "expires", resetAt: off + 2*m},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock()
			c.Advance(tt.start)
			w, err := open(t, b, c).Window(tt.alg, m)
			require.NoError(t, err)
			key := tt.key
			if key == "" {
				key = "k"
			}
			runSteps(t, w, c, key, tt.limit, tt.steps)
		})
	}
}

// testStaggered checks that StaggeredWindow keys reset at different
// instants, each at the stable per-key offset of internal/limits (the same
// on every backend), and keep their boundaries from window to window.
func testStaggered(t *testing.T, b Backend) {
	c := NewClock()
	c.Advance(7 * time.Second)
	w, err := open(t, b, c).Window(ratedb.StaggeredWindow, time.Minute)
	require.NoError(t, err)
	ends := map[int64]bool{}
	first := map[string]time.Time{}
	for i := 0; i < 100; i++ {
		k := fmt.Sprint("client-", i)
		r, err := w.Hit(ctx, k, 10, 1)
		require.NoError(t, err)
		off := limits.StaggerOffset(k, time.Minute.Milliseconds())
		want := Epoch.Add(time.Duration(off) * time.Millisecond)
		if !want.After(c.Now()) {
			want = want.Add(time.Minute)
		}
		assert.True(t, want.Equal(r.ResetAt), "key %s: ResetAt +%v, want +%v", k, r.ResetAt.Sub(Epoch), want.Sub(Epoch))
		ends[r.ResetAt.UnixMilli()] = true
		first[k] = r.ResetAt
	}
	assert.Greater(t, len(ends), 90, "resets are spread over the minute")
	c.Advance(time.Minute)
	for k, end := range first {
		r, err := w.Hit(ctx, k, 10, 1)
		require.NoError(t, err)
		assert.True(t, end.Add(time.Minute).Equal(r.ResetAt), "key %s keeps its boundaries", k)
		assert.Equal(t, int64(1), r.Count, "key %s: a new window", k)
	}
}

// testSeparation checks which limiters share counters: different
// algorithms or scales never do, a Window never shares with a Layered
// limiter, and Layered limiters with the same algorithm and scales do
// whatever their limits.
func testSeparation(t *testing.T, b Backend) {
	c := NewClock()
	handle := b.Open(t, c.Now)
	s := handle()
	a, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	_, err = a.Inc(ctx, "k", 5)
	require.NoError(t, err)

	for _, other := range []struct {
		alg   ratedb.Algorithm
		scale time.Duration
	}{
		{ratedb.PerKeyWindow, time.Minute},
		{ratedb.StaggeredWindow, time.Minute},
		{ratedb.FixedWindow, time.Hour},
		{ratedb.FixedWindow, time.Minute + time.Millisecond},
	} {
		w, err := s.Window(other.alg, other.scale)
		require.NoError(t, err)
		n, err := w.Get(ctx, "k")
		require.NoError(t, err)
		assert.Zero(t, n, "%v %v", other.alg, other.scale)
	}
	l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 10})
	require.NoError(t, err)
	counts, err := l.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{0}, counts, "a Window and a Layered limiter never share")

	// Another handle (another process) sees the same counter.
	again, err := handle().Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	n, err := again.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(5), n)
	n, err = a.Get(ctx, "K")
	require.NoError(t, err)
	assert.Zero(t, n, "keys are case-sensitive")

	// Keys that differ only in bytes a backend might treat specially.
	keys := []string{"a}b", "a}c", "}x", "{x}", `a\)b`, `a\\b`, "a:f60000", "sp ace", "\x00", "é"}
	for i, k := range keys {
		_, err := a.Set(ctx, k, int64(i+1))
		require.NoError(t, err)
	}
	for i, k := range keys {
		n, err := a.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, int64(i+1), n, "key %q", k)
	}

	tiers := []ratedb.Tier{{Scale: time.Minute, Limit: 1}, {Scale: time.Hour, Limit: 5}}
	l1, err := s.Layered(ratedb.FixedWindow, tiers...)
	require.NoError(t, err)
	l2, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 100}, ratedb.Tier{Scale: time.Hour, Limit: 100})
	require.NoError(t, err)
	_, err = l1.Hit(ctx, "k", 1)
	require.NoError(t, err)
	counts, err = l2.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1}, counts, "same algorithm and scales share counters")

	// The set of scales names the counters, not their order: a reversed
	// limiter reports the shared counts in its own tier order.
	rev, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Hour, Limit: 2}, ratedb.Tier{Scale: time.Minute, Limit: 100})
	require.NoError(t, err)
	r, err := rev.Hit(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.Len(t, r.Tiers, 2)
	assert.Equal(t, time.Hour, r.Tiers[0].Scale)
	assert.Equal(t, int64(2), r.Tiers[0].Count, "the hour tier counted l1's hit and this one")
	assert.Equal(t, int64(0), r.Tiers[0].Remaining)
	assert.Equal(t, 0, r.Tier, "the tier with the least room, in the given order")
	counts, err = l1.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 2}, counts, "tiers in another order share the counters")
	counts, err = rev.Inc(ctx, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 3}, counts)
	ends, err := rev.ExpiresAt(ctx, "k")
	require.NoError(t, err)
	require.Len(t, ends, 2)
	assert.True(t, ends[0].After(ends[1]), "the hour tier's window ends after the minute tier's")
	r, err = rev.Hit(ctx, "k", 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed, "the hour tier (limit 2) is full")
	assert.Equal(t, 0, r.Tier)
	l3, err := s.Layered(ratedb.PerKeyWindow, tiers...)
	require.NoError(t, err)
	counts, err = l3.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, counts)
}

func testBadInput(t *testing.T, b Backend) {
	s := open(t, b, NewClock())
	w, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	long := strings.Repeat("x", ratedb.MaxKeyLen+1)
	var nilCtx context.Context
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	many := make([]ratedb.Tier, 17)
	for i := range many {
		many[i] = ratedb.Tier{Scale: time.Duration(i+1) * time.Second, Limit: 1}
	}
	oneTier := ratedb.Tier{Scale: time.Minute, Limit: 1}
	l, err := s.Layered(ratedb.FixedWindow, oneTier)
	require.NoError(t, err)

	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"empty key", func() error { _, err := w.Hit(ctx, "", 1, 1); return err }, ratedb.ErrInvalidArgument},
		{"long key", func() error { _, err := w.Hit(ctx, long, 1, 1); return err }, ratedb.ErrInvalidArgument},
		{"negative limit", func() error { _, err := w.Hit(ctx, "k", -1, 1); return err }, ratedb.ErrInvalidArgument},
		{"zero increment", func() error { _, err := w.Hit(ctx, "k", 1, 0); return err }, ratedb.ErrInvalidArgument},
		{"negative increment", func() error { _, err := w.Inc(ctx, "k", -3); return err }, ratedb.ErrInvalidArgument},
		{"negative count", func() error { _, err := w.Set(ctx, "k", -1); return err }, ratedb.ErrInvalidArgument},
		{"zero refund", func() error { _, _, err := w.Refund(ctx, "k", 0); return err }, ratedb.ErrInvalidArgument},
		{"negative refund", func() error { _, _, err := w.Refund(ctx, "k", -2); return err }, ratedb.ErrInvalidArgument},
		{"refund empty key", func() error { _, _, err := w.Refund(ctx, "", 1); return err }, ratedb.ErrInvalidArgument},
		{"refund long key", func() error { _, _, err := w.Refund(ctx, long, 1); return err }, ratedb.ErrInvalidArgument},
		{"nil context", func() error { _, err := w.Get(nilCtx, "k"); return err }, ratedb.ErrInvalidArgument},
		{"cancelled context", func() error { _, err := w.Hit(cancelled, "k", 1, 1); return err }, context.Canceled},
		{"reset empty key", func() error { return w.Reset(ctx, "") }, ratedb.ErrInvalidArgument},
		{"expires long key", func() error { _, err := w.ExpiresAt(ctx, long); return err }, ratedb.ErrInvalidArgument},
		{"scale under 1ms", func() error { _, err := s.Window(ratedb.FixedWindow, time.Microsecond); return err }, ratedb.ErrInvalidArgument},
		{"zero scale", func() error { _, err := s.Window(ratedb.FixedWindow, 0); return err }, ratedb.ErrInvalidArgument},
		{"fractional scale", func() error { _, err := s.Window(ratedb.FixedWindow, 1500*time.Microsecond); return err }, ratedb.ErrInvalidArgument},
		{"unknown algorithm", func() error { _, err := s.Window(ratedb.Algorithm(9), time.Second); return err }, ratedb.ErrInvalidArgument},
		{"zero algorithm", func() error { _, err := s.Window(0, time.Second); return err }, ratedb.ErrInvalidArgument},
		{"overflow", func() error {
			if _, err := w.Set(ctx, "big", 1<<62); err != nil {
				return err
			}
			_, err := w.Inc(ctx, "big", 1<<62)
			return err
		}, ratedb.ErrInvalidArgument},
		{"layered no tiers", func() error { _, err := s.Layered(ratedb.FixedWindow); return err }, ratedb.ErrInvalidArgument},
		{"layered too many tiers", func() error { _, err := s.Layered(ratedb.FixedWindow, many...); return err }, ratedb.ErrInvalidArgument},
		{"layered zero scale", func() error { _, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Limit: 1}); return err }, ratedb.ErrInvalidArgument},
		{"layered sub-ms scale", func() error {
			_, err := s.Layered(ratedb.FixedWindow, oneTier, ratedb.Tier{Scale: 10 * time.Microsecond, Limit: 1})
			return err
		}, ratedb.ErrInvalidArgument},
		{"layered negative limit", func() error {
			_, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: -1})
			return err
		}, ratedb.ErrInvalidArgument},
		{"layered unknown algorithm", func() error { _, err := s.Layered(ratedb.Algorithm(0), oneTier); return err }, ratedb.ErrInvalidArgument},
		{"layered zero increment", func() error { _, err := l.Hit(ctx, "k", 0); return err }, ratedb.ErrInvalidArgument},
		{"layered empty key", func() error { _, err := l.Hit(ctx, "", 1); return err }, ratedb.ErrInvalidArgument},
		{"layered inc negative", func() error { _, err := l.Inc(ctx, "k", -1); return err }, ratedb.ErrInvalidArgument},
		{"layered get long key", func() error { _, err := l.Get(ctx, long); return err }, ratedb.ErrInvalidArgument},
		{"layered expires nil context", func() error { _, err := l.ExpiresAt(nilCtx, "k"); return err }, ratedb.ErrInvalidArgument},
		{"layered reset cancelled", func() error { return l.Reset(cancelled, "k") }, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, tc.want)
			if !errors.Is(tc.want, context.Canceled) {
				assert.NotContains(t, err.Error(), "xxxx", "errors never echo the key")
			}
		})
	}
	// Nothing changed.
	for _, k := range []string{"k", "big"} {
		n, err := w.Get(ctx, k)
		require.NoError(t, err)
		if k == "k" {
			assert.Zero(t, n)
		}
	}
	counts, err := l.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{0}, counts)
}

// testClockRange: a clock reading outside 1970-01-01 .. 9999-12-31 is an
// error wrapping ErrClockOutOfRange on every backend, never a wrong answer,
// and counts nothing.
func testClockRange(t *testing.T, b Backend) {
	var at atomic.Int64
	handle := b.Open(t, func() time.Time { return time.UnixMilli(at.Load()) })
	s := handle()
	w, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5}, ratedb.Tier{Scale: time.Hour, Limit: 9})
	require.NoError(t, err)
	for _, bad := range []time.Time{
		time.Unix(0, 0).Add(-time.Millisecond),
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		at.Store(bad.UnixMilli())
		_, err := w.Hit(ctx, "k", 5, 1)
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Window.Hit at %v", bad)
		_, err = w.Inc(ctx, "k", 1)
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Window.Inc at %v", bad)
		_, err = l.Hit(ctx, "k", 1)
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Layered.Hit at %v", bad)
	}
	at.Store(Epoch.UnixMilli())
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.Zero(t, n, "nothing was counted")
	counts, err := l.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, counts)
}
