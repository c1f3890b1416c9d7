package ratedb_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/corrupt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var ctx = context.Background()

// step is one operation of a table test, run after advancing the clock.
type step struct {
	advance time.Duration
	op      string // "hit", "inc", "set", "get", "expires", "reset"
	arg     int64  // increment for hit/inc, count for set

	allowed   bool          // hit
	count     int64         // hit, inc, set, get: count after the call
	resetAt   time.Duration // hit, expires: window end as an offset from epoch (0: zero Time for expires)
	retry     time.Duration // hit
	remaining int64         // hit
}

func runSteps(t *testing.T, w *ratedb.Window, c *fakeClock, limit int64, steps []step) {
	t.Helper()
	for i, s := range steps {
		c.Advance(s.advance)
		name := fmt.Sprintf("step %d (%s at +%v)", i, s.op, c.Now().Sub(epoch))
		switch s.op {
		case "hit":
			r, err := w.Hit(ctx, "k", limit, s.arg)
			require.NoError(t, err, name)
			assert.Equal(t, s.allowed, r.Allowed, name)
			assert.Equal(t, s.count, r.Count, name)
			assert.Equal(t, limit, r.Limit, name)
			assert.Equal(t, s.remaining, r.Remaining, name)
			assert.True(t, epoch.Add(s.resetAt).Equal(r.ResetAt), "%s: ResetAt %v, want +%v", name, r.ResetAt.Sub(epoch), s.resetAt)
			assert.Equal(t, s.retry, r.RetryAfter, name)
			assert.Equal(t, w.Scale(), r.Scale, name)
		case "inc":
			n, err := w.Inc(ctx, "k", s.arg)
			require.NoError(t, err, name)
			assert.Equal(t, s.count, n, name)
		case "set":
			n, err := w.Set(ctx, "k", s.arg)
			require.NoError(t, err, name)
			assert.Equal(t, s.count, n, name)
		case "get":
			n, err := w.Get(ctx, "k")
			require.NoError(t, err, name)
			assert.Equal(t, s.count, n, name)
		case "expires":
			at, err := w.ExpiresAt(ctx, "k")
			require.NoError(t, err, name)
			if s.resetAt == 0 {
				assert.True(t, at.IsZero(), "%s: ExpiresAt %v, want zero", name, at)
			} else {
				assert.True(t, epoch.Add(s.resetAt).Equal(at), "%s: ExpiresAt +%v, want +%v", name, at.Sub(epoch), s.resetAt)
			}
		case "reset":
			require.NoError(t, w.Reset(ctx, "k"), name)
		default:
			t.Fatalf("unknown op %q", s.op)
		}
	}
}

func TestAlgorithms(t *testing.T) {
	const m = time.Minute
	tests := []struct {
		name  string
		alg   ratedb.Algorithm
		start time.Duration // clock offset from epoch before the first step
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			modes(t, func(t *testing.T, path string) {
				c := newClock()
				c.Advance(tt.start)
				db := openDB(t, path, testOptions(c))
				w, err := db.Window(tt.alg, m)
				require.NoError(t, err)
				runSteps(t, w, c, tt.limit, tt.steps)
			})
		})
	}
}

func TestWindowIdentity(t *testing.T) {
	db := openDB(t, "", testOptions(newClock()))
	a, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	b, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	assert.Same(t, a, b, "same algorithm and scale give the same *Window")
	assert.Equal(t, ratedb.FixedWindow, a.Algorithm())

	// Different algorithms and scales never share a counter.
	c, err := db.Window(ratedb.PerKeyWindow, time.Minute)
	require.NoError(t, err)
	d, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = a.Inc(ctx, "k", 5)
	require.NoError(t, err)
	for _, w := range []*ratedb.Window{c, d} {
		n, err := w.Get(ctx, "k")
		require.NoError(t, err)
		assert.Zero(t, n)
	}
	n, err := b.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(5), n)
}

func TestConcurrentExactness(t *testing.T) {
	const goroutines, perG, limit = 64, 50, 1000
	for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			modes(t, func(t *testing.T, path string) {
				c := newClock()
				db := openDB(t, path, testOptions(c))
				w, err := db.Window(alg, time.Hour)
				require.NoError(t, err)
				var allowed atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				for g := 0; g < goroutines; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for i := 0; i < perG; i++ {
							r, err := w.Hit(ctx, "hot", limit, 1)
							if err != nil {
								t.Error(err)
								return
							}
							if r.Allowed {
								allowed.Add(1)
							}
							if i%10 == 0 && path != "" {
								if err := db.Snapshot(); err != nil {
									t.Error(err)
									return
								}
							}
						}
					}()
				}
				close(start)
				wg.Wait()
				assert.Equal(t, int64(limit), allowed.Load(), "exactly limit hits allowed")
				n, err := w.Get(ctx, "hot")
				require.NoError(t, err)
				assert.Equal(t, int64(limit), n)
				st := db.Stats()
				assert.Equal(t, int64(limit), st.Allowed)
				assert.Equal(t, int64(goroutines*perG-limit), st.Denied)
			})
		})
	}
}

// TestSpill hits thousands of keys through a tiny cache, so windows
// constantly leave memory and come back, and checks every count exactly.
func TestSpill(t *testing.T) {
	const keys, rounds = 3000, 3
	modes(t, func(t *testing.T, path string) {
		c := newClock()
		opts := testOptions(c)
		opts.MaxHotKeys = 16
		db := openDB(t, path, opts)
		w, err := db.Window(ratedb.FixedWindow, time.Hour)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					for k := g; k < keys; k += 4 {
						res, err := w.Hit(ctx, fmt.Sprintf("key-%d", k), 100, int64(k%7+1))
						if err != nil || !res.Allowed {
							t.Errorf("hit %d: %v %+v", k, err, res)
							return
						}
					}
					if path != "" {
						if err := db.Snapshot(); err != nil {
							t.Error(err)
						}
					}
				}
			}()
		}
		wg.Wait()
		for k := 0; k < keys; k++ {
			n, err := w.Get(ctx, fmt.Sprintf("key-%d", k))
			require.NoError(t, err)
			require.Equal(t, int64(rounds*(k%7+1)), n, "key-%d", k)
		}
		st := db.Stats()
		assert.Positive(t, st.Spilled, "the tiny cache spilled windows")
		if path != "" {
			assert.Positive(t, st.Reloaded, "spilled windows were reloaded from the file")
			require.NoError(t, db.Snapshot())
			assert.Equal(t, int64(keys), db.Stats().WindowsOnDisk)
			assert.Less(t, db.Stats().WindowsInMemory, int64(keys), "cold windows left memory once written")
		}
	})
}

func TestRestart(t *testing.T) {
	for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			path := tempPath(t)
			c := newClock()
			c.Advance(17 * time.Second)
			db, err := ratedb.Open(path, testOptions(c))
			require.NoError(t, err)
			w, err := db.Window(alg, time.Minute)
			require.NoError(t, err)
			for i := 0; i < 3; i++ {
				_, err := w.Hit(ctx, "user", 5, 1)
				require.NoError(t, err)
			}
			end, err := w.ExpiresAt(ctx, "user")
			require.NoError(t, err)
			_, err = w.Hit(ctx, "other", 5, 5)
			require.NoError(t, err)
			otherEnd, err := w.ExpiresAt(ctx, "other")
			require.NoError(t, err)
			require.NoError(t, db.Close())
			require.ErrorIs(t, db.Close(), ratedb.ErrClosed)

			// Restart before the user's window ends (StaggeredWindow places
			// it anywhere in the minute).
			c.Advance(end.Sub(c.Now()) / 2)
			db = openDB(t, path, testOptions(c))
			w, err = db.Window(alg, time.Minute)
			require.NoError(t, err)
			n, err := w.Get(ctx, "user")
			require.NoError(t, err)
			assert.Equal(t, int64(3), n, "count survives the restart")
			end2, err := w.ExpiresAt(ctx, "user")
			require.NoError(t, err)
			assert.True(t, end.Equal(end2), "the window keeps its original start")
			r, err := w.Hit(ctx, "user", 5, 2)
			require.NoError(t, err)
			assert.True(t, r.Allowed)
			assert.Equal(t, int64(5), r.Count)
			r, err = w.Hit(ctx, "user", 5, 1)
			require.NoError(t, err)
			assert.False(t, r.Allowed, "the limit holds across the restart")
			r, err = w.Hit(ctx, "other", 5, 1)
			require.NoError(t, err)
			assert.Equal(t, !otherEnd.After(c.Now()), r.Allowed, "other's window resumes too")
			assert.Equal(t, int64(2), db.Stats().WindowsOnDisk)

			// A window that expired while the process was down is ignored.
			require.NoError(t, db.Close())
			c.Advance(2 * time.Minute)
			db = openDB(t, path, testOptions(c))
			w, err = db.Window(alg, time.Minute)
			require.NoError(t, err)
			n, err = w.Get(ctx, "user")
			require.NoError(t, err)
			assert.Zero(t, n)
			removed, err := db.Clean()
			require.NoError(t, err)
			assert.Equal(t, 2, removed, "expired windows are cleaned from the file")
			assert.Zero(t, db.Stats().WindowsOnDisk)
		})
	}
}

func TestResetPersists(t *testing.T) {
	path := tempPath(t)
	c := newClock()
	db, err := ratedb.Open(path, testOptions(c))
	require.NoError(t, err)
	w, _ := db.Window(ratedb.FixedWindow, time.Hour)
	_, err = w.Inc(ctx, "a", 3)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	// Reset a key that is only on disk, then restart: it stays reset.
	db, err = ratedb.Open(path, testOptions(c))
	require.NoError(t, err)
	w, _ = db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, w.Reset(ctx, "a"))
	require.NoError(t, w.Reset(ctx, "never-seen"))
	n, err := w.Get(ctx, "a")
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, db.Close())

	db = openDB(t, path, testOptions(c))
	w, _ = db.Window(ratedb.FixedWindow, time.Hour)
	n, err = w.Get(ctx, "a")
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Zero(t, db.Stats().WindowsOnDisk)
}

func TestJanitor(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		c := newClock()
		opts := testOptions(c)
		opts.KeyOlderThan = 30 * time.Second
		db := openDB(t, path, opts)
		short, _ := db.Window(ratedb.FixedWindow, time.Minute)
		long, _ := db.Window(ratedb.PerKeyWindow, time.Hour)
		for i := 0; i < 10; i++ {
			_, err := short.Hit(ctx, fmt.Sprint("s", i), 10, 1)
			require.NoError(t, err)
		}
		_, err := long.Hit(ctx, "l", 10, 1)
		require.NoError(t, err)
		require.NoError(t, db.Snapshot())
		assert.Equal(t, int64(11), db.Stats().WindowsInMemory)

		removed, err := db.Clean()
		require.NoError(t, err)
		assert.Zero(t, removed, "nothing has expired yet")

		c.Advance(time.Minute) // the short windows have ended, but KeyOlderThan keeps them
		removed, err = db.Clean()
		require.NoError(t, err)
		assert.Zero(t, removed)

		c.Advance(30 * time.Second)
		removed, err = db.Clean()
		require.NoError(t, err)
		assert.Equal(t, 10, removed)
		st := db.Stats()
		assert.Equal(t, int64(1), st.WindowsInMemory)
		assert.Equal(t, int64(10), st.Cleaned)
		if path != "" {
			assert.Equal(t, int64(1), st.WindowsOnDisk)
		}

		// A key that keeps getting hit is never removed.
		for i := 0; i < 5; i++ {
			c.Advance(59 * time.Minute)
			_, err = long.Hit(ctx, "l", 10, 1)
			require.NoError(t, err)
			removed, err = db.Clean()
			require.NoError(t, err)
			assert.Zero(t, removed)
		}
		n, err := long.Get(ctx, "l")
		require.NoError(t, err)
		assert.Positive(t, n)

		// A window hit again after removal starts fresh.
		r, err := short.Hit(ctx, "s1", 10, 1)
		require.NoError(t, err)
		assert.Equal(t, int64(1), r.Count)
	})
}

func TestBadInput(t *testing.T) {
	c := newClock()
	db := openDB(t, "", testOptions(c))
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	long := strings.Repeat("x", ratedb.MaxKeyLen+1)
	var nilCtx context.Context
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

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
		{"nil context", func() error { _, err := w.Get(nilCtx, "k"); return err }, ratedb.ErrInvalidArgument},
		{"cancelled context", func() error { _, err := w.Hit(cancelled, "k", 1, 1); return err }, context.Canceled},
		{"reset empty key", func() error { return w.Reset(ctx, "") }, ratedb.ErrInvalidArgument},
		{"expires long key", func() error { _, err := w.ExpiresAt(ctx, long); return err }, ratedb.ErrInvalidArgument},
		{"scale under 1ms", func() error { _, err := db.Window(ratedb.FixedWindow, time.Microsecond); return err }, ratedb.ErrInvalidArgument},
		{"zero scale", func() error { _, err := db.Window(ratedb.FixedWindow, 0); return err }, ratedb.ErrInvalidArgument},
		{"fractional scale", func() error { _, err := db.Window(ratedb.FixedWindow, 1500*time.Microsecond); return err }, ratedb.ErrInvalidArgument},
		{"unknown algorithm", func() error { _, err := db.Window(ratedb.Algorithm(9), time.Second); return err }, ratedb.ErrInvalidArgument},
		{"zero algorithm", func() error { _, err := db.Window(0, time.Second); return err }, ratedb.ErrInvalidArgument},
		{"overflow", func() error {
			if _, err := w.Set(ctx, "big", 1<<62); err != nil {
				return err
			}
			_, err := w.Inc(ctx, "big", 1<<62)
			return err
		}, ratedb.ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, tc.want)
		})
	}
	// Nothing changed.
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Zero(t, db.Stats().Allowed+db.Stats().Denied)
	// Errors never echo the key.
	_, err = w.Hit(ctx, long, 1, 1)
	assert.NotContains(t, err.Error(), "xxxx")
}

func TestBadOptions(t *testing.T) {
	_, err := ratedb.Open("", &ratedb.Options{KeyOlderThan: -time.Second, MaxHotKeys: -1, OpenTimeout: -1, OnCorrupt: 7})
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	for _, field := range []string{"KeyOlderThan", "MaxHotKeys", "OpenTimeout", "OnCorrupt"} {
		assert.Contains(t, err.Error(), field, "every invalid field is reported at once")
	}
}

func TestClosed(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		db, err := ratedb.Open(path, testOptions(newClock()))
		require.NoError(t, err)
		w, _ := db.Window(ratedb.FixedWindow, time.Minute)
		l, _ := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 1})
		require.NoError(t, db.Close())
		calls := map[string]func() error{
			"Hit":       func() error { _, err := w.Hit(ctx, "k", 1, 1); return err },
			"Inc":       func() error { _, err := w.Inc(ctx, "k", 1); return err },
			"Get":       func() error { _, err := w.Get(ctx, "k"); return err },
			"Set":       func() error { _, err := w.Set(ctx, "k", 1); return err },
			"ExpiresAt": func() error { _, err := w.ExpiresAt(ctx, "k"); return err },
			"Reset":     func() error { return w.Reset(ctx, "k") },
			"Layered":   func() error { _, err := l.Hit(ctx, "k", 1); return err },
			"Window":    func() error { _, err := db.Window(ratedb.FixedWindow, time.Second); return err },
			"Snapshot":  db.Snapshot,
			"Clean":     func() error { _, err := db.Clean(); return err },
			"Close":     db.Close,
		}
		for name, call := range calls {
			assert.ErrorIs(t, call(), ratedb.ErrClosed, name)
		}
		_ = db.Stats() // still works
	})
}

func TestCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := dir + "/" + name
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(i*7 + 3)
	}
	// A valid database, then damaged copies of it.
	good := tempPath(t)
	c := newClock()
	db, err := ratedb.Open(good, testOptions(c))
	require.NoError(t, err)
	w, _ := db.Window(ratedb.FixedWindow, time.Hour)
	for i := 0; i < 2000; i++ {
		_, err := w.Inc(ctx, fmt.Sprint("key-", i), 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	data, err := os.ReadFile(good)
	require.NoError(t, err)
	data = corrupt.TrimSlack(data) // damage the pages that hold data

	cases := map[string][]byte{
		"zero bytes":  {},
		"a few bytes": data[:10],
		"one page":    data[:4096],
		"two pages":   data[:8192],
		"half":        data[:len(data)/2],
		"garbage":     garbage,
		"text":        []byte("hello, this is not a database\n"),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			p := write(strings.ReplaceAll(name, " ", "_")+".db", b)
			_, err := ratedb.Open(p, testOptions(c))
			require.ErrorIs(t, err, ratedb.ErrCorrupt)
		})
	}

	t.Run("move aside", func(t *testing.T) {
		p := write("aside.db", data[:len(data)/2])
		opts := testOptions(c)
		opts.OnCorrupt = ratedb.CorruptMoveAside
		db := openDB(t, p, opts)
		w, _ := db.Window(ratedb.FixedWindow, time.Hour)
		n, err := w.Get(ctx, "key-1")
		require.NoError(t, err)
		assert.Zero(t, n, "started empty")
		matches, _ := filepathGlob(p + ".corrupt-*")
		assert.Len(t, matches, 1, "the bad file was kept aside")
	})
}

func TestLocked(t *testing.T) {
	path := tempPath(t)
	db := openDB(t, path, testOptions(newClock()))
	opts := testOptions(newClock())
	opts.OpenTimeout = 50 * time.Millisecond
	_, err := ratedb.Open(path, opts)
	require.ErrorIs(t, err, ratedb.ErrLocked)
	require.NoError(t, db.Close())
	db2 := openDB(t, path, opts)
	require.NoError(t, db2.Close())
}

func TestStatsErrorsMatch(t *testing.T) {
	// Sentinels are distinct and matchable.
	errs := []error{ratedb.ErrClosed, ratedb.ErrInvalidArgument, ratedb.ErrLocked, ratedb.ErrCorrupt, ratedb.ErrNotRegularFile, ratedb.ErrUnavailable}
	for i, a := range errs {
		for j, b := range errs {
			assert.Equal(t, i == j, errors.Is(a, b))
		}
		assert.True(t, strings.HasPrefix(a.Error(), "ratedb: "))
	}
}

func TestSnapshotCostsChangedWindowsOnly(t *testing.T) {
	path := tempPath(t)
	c := newClock()
	db, err := ratedb.Open(path, testOptions(c))
	require.NoError(t, err)
	w, _ := db.Window(ratedb.FixedWindow, time.Hour)
	for i := 0; i < 1000; i++ {
		_, err := w.Hit(ctx, fmt.Sprint("k", i), 10, 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Snapshot())
	st := db.Stats()
	assert.Equal(t, int64(1), st.Snapshots)
	assert.Equal(t, int64(1000), st.LastSnapshotWindows)
	assert.Positive(t, st.LastSnapshotBytes)
	assert.Positive(t, st.LastSnapshotDuration)
	assert.Equal(t, int64(1000), st.WindowsOnDisk)

	for i := 0; i < 3; i++ {
		_, err := w.Hit(ctx, fmt.Sprint("k", i), 10, 1)
		require.NoError(t, err)
	}
	_, err = w.Hit(ctx, "k5", 0, 1) // denied: changes nothing
	require.NoError(t, err)
	require.NoError(t, db.Snapshot())
	st = db.Stats()
	assert.Equal(t, int64(2), st.Snapshots)
	assert.Equal(t, int64(3), st.LastSnapshotWindows, "only changed windows are written")
	require.NoError(t, db.Snapshot())
	assert.Equal(t, int64(2), db.Stats().Snapshots, "a snapshot with nothing changed writes nothing")
	require.NoError(t, db.Close())

	// Opening reads no window: they load on first use.
	db = openDB(t, path, testOptions(c))
	st = db.Stats()
	assert.Zero(t, st.WindowsInMemory)
	assert.Zero(t, st.Reloaded)
	assert.Equal(t, int64(1000), st.WindowsOnDisk)
	w, _ = db.Window(ratedb.FixedWindow, time.Hour)
	n, err := w.Get(ctx, "k1")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	r, err := w.Hit(ctx, "k2", 10, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(3), r.Count)
	assert.Equal(t, int64(1), db.Stats().Reloaded)
}

// TestCloseRacesHits closes a DB under heavy traffic: no panic, no hang, every
// call completes or returns ErrClosed, and every allowed hit is in the file.
func TestCloseRacesHits(t *testing.T) {
	path := tempPath(t)
	c := newClock()
	opts := testOptions(c)
	opts.MaxHotKeys = 8
	db, err := ratedb.Open(path, opts)
	require.NoError(t, err)
	w, _ := db.Window(ratedb.FixedWindow, time.Hour)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				r, err := w.Hit(ctx, fmt.Sprint("k", i%50), 1<<40, 1)
				if errors.Is(err, ratedb.ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	for db.Stats().Allowed < 2000 {
		runtimeGosched()
	}
	require.NoError(t, db.Close())
	wg.Wait()

	db = openDB(t, path, opts)
	w, _ = db.Window(ratedb.FixedWindow, time.Hour)
	var total int64
	for k := 0; k < 50; k++ {
		n, err := w.Get(ctx, fmt.Sprint("k", k))
		require.NoError(t, err)
		total += n
	}
	assert.Equal(t, allowed.Load(), total, "a graceful Close loses nothing")
}
