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
		// Two hits each: a window's second use puts it in the cache, so
		// that the windows stay in memory after the snapshot.
		for range 2 {
			for i := 0; i < 10; i++ {
				_, err := short.Hit(ctx, fmt.Sprint("s", i), 10, 1)
				require.NoError(t, err)
			}
			_, err := long.Hit(ctx, "l", 10, 1)
			require.NoError(t, err)
		}
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

func TestBadOptions(t *testing.T) {
	_, err := ratedb.Open("", &ratedb.Options{KeyOlderThan: -time.Second, MaxHotKeys: -1, OpenTimeout: -1, OnCorrupt: 7})
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	for _, field := range []string{"KeyOlderThan", "MaxHotKeys", "OpenTimeout", "OnCorrupt"} {
		assert.Contains(t, err.Error(), field, "every invalid field is reported at once")
	}
}

// Options.KeyOlderThan's doc: it must be a whole number of milliseconds.
func TestKeyOlderThanWholeMilliseconds(t *testing.T) {
	_, err := ratedb.Open("", &ratedb.Options{KeyOlderThan: 1500 * time.Microsecond})
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "KeyOlderThan")
	db, err := ratedb.Open("", &ratedb.Options{KeyOlderThan: 2 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, db.Close())
}

func TestClosed(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		db, err := ratedb.Open(path, testOptions(newClock()))
		require.NoError(t, err)
		w, _ := db.Window(ratedb.FixedWindow, time.Minute)
		l, _ := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 1})
		// Results of this DB's limiters, allowed and denied, for Undo.
		wAllowed, err := w.Hit(ctx, "k", 1, 1)
		require.NoError(t, err)
		wDenied, err := w.Hit(ctx, "k", 1, 1)
		require.NoError(t, err)
		lAllowed, err := l.Hit(ctx, "k", 1)
		require.NoError(t, err)
		lDenied, err := l.Hit(ctx, "k", 1)
		require.NoError(t, err)
		require.True(t, wAllowed.Allowed && lAllowed.Allowed)
		require.False(t, wDenied.Allowed || lDenied.Allowed)
		require.NoError(t, db.Close())
		// ErrClosed: "returned by every operation on a DB (or on a Window or
		// Layered limiter of that DB) after Close has begun".
		calls := map[string]func() error{
			"Hit":                 func() error { _, err := w.Hit(ctx, "k", 1, 1); return err },
			"Hit over the limit":  func() error { _, err := w.Hit(ctx, "k", 1, 2); return err },
			"Inc":                 func() error { _, err := w.Inc(ctx, "k", 1); return err },
			"Get":                 func() error { _, err := w.Get(ctx, "k"); return err },
			"Set":                 func() error { _, err := w.Set(ctx, "k", 1); return err },
			"ExpiresAt":           func() error { _, err := w.ExpiresAt(ctx, "k"); return err },
			"State":               func() error { _, _, err := w.State(ctx, "k"); return err },
			"Refund":              func() error { _, _, err := w.Refund(ctx, "k", 1); return err },
			"Undo allowed":        func() error { return w.Undo(ctx, "k", wAllowed, 1) },
			"Undo denied":         func() error { return w.Undo(ctx, "k", wDenied, 1) },
			"Reset":               func() error { return w.Reset(ctx, "k") },
			"Layered":             func() error { _, err := l.Hit(ctx, "k", 1); return err },
			"Layered over limit":  func() error { _, err := l.Hit(ctx, "k", 2); return err },
			"Layered.Inc":         func() error { _, err := l.Inc(ctx, "k", 1); return err },
			"Layered.Get":         func() error { _, err := l.Get(ctx, "k"); return err },
			"Layered.ExpiresAt":   func() error { _, err := l.ExpiresAt(ctx, "k"); return err },
			"Layered.State":       func() error { _, _, err := l.State(ctx, "k"); return err },
			"Layered.Refund":      func() error { _, err := l.Refund(ctx, "k", 1); return err },
			"Layered.Undo":        func() error { return l.Undo(ctx, "k", lAllowed, 1) },
			"Layered.Undo denied": func() error { return l.Undo(ctx, "k", lDenied, 1) },
			"Layered.Reset":       func() error { return l.Reset(ctx, "k") },
			"Window":              func() error { _, err := db.Window(ratedb.FixedWindow, time.Second); return err },
			"DB.Layered":          func() error { _, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Second}); return err },
			"Snapshot":            db.Snapshot,
			"Clean":               func() error { _, err := db.Clean(); return err },
			"Verify":              db.Verify,
			"Close":               db.Close,
		}
		for name, call := range calls {
			assert.ErrorIs(t, call(), ratedb.ErrClosed, name)
		}
		_ = db.Stats() // still works
	})
}

// ErrClosed is returned by every call after Close has begun whatever its
// arguments: it is checked before them. Before, a call with an invalid
// argument (an empty or oversized key, a negative limit, a non-positive
// increment, a nil or ended context, an unknown algorithm, a bad scale or
// tier) on a closed DB returned ErrInvalidArgument or the context's error,
// while errors.go and Close promise ErrClosed for every operation.
func TestClosedWhateverTheArguments(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		db, err := ratedb.Open(path, testOptions(newClock()))
		require.NoError(t, err)
		w, err := db.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		l, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 1})
		require.NoError(t, err)
		r, err := w.Hit(ctx, "k", 1, 1)
		require.NoError(t, err)
		lr, err := l.Hit(ctx, "k", 1)
		require.NoError(t, err)
		require.NoError(t, db.Close())

		ended, cancel := context.WithCancel(context.Background())
		cancel()
		long := strings.Repeat("x", ratedb.MaxKeyLen+1)
		calls := map[string]func() error{
			"Hit empty key":         func() error { _, err := w.Hit(ctx, "", 1, 1); return err },
			"Hit oversized key":     func() error { _, err := w.Hit(ctx, long, 1, 1); return err },
			"Hit negative limit":    func() error { _, err := w.Hit(ctx, "k", -1, 1); return err },
			"Hit zero increment":    func() error { _, err := w.Hit(ctx, "k", 1, 0); return err },
			"Hit nil context":       func() error { _, err := w.Hit(nil, "k", 1, 1); return err },
			"Hit ended context":     func() error { _, err := w.Hit(ended, "k", 1, 1); return err },
			"Inc zero increment":    func() error { _, err := w.Inc(ctx, "k", 0); return err },
			"Set negative count":    func() error { _, err := w.Set(ctx, "k", -1); return err },
			"Refund zero amount":    func() error { _, _, err := w.Refund(ctx, "k", 0); return err },
			"Undo zero increment":   func() error { return w.Undo(ctx, "k", r, 0) },
			"Undo Layered result":   func() error { return w.Undo(ctx, "k", lr, 1) },
			"Get empty key":         func() error { _, err := w.Get(ctx, ""); return err },
			"ExpiresAt empty key":   func() error { _, err := w.ExpiresAt(ctx, ""); return err },
			"State empty key":       func() error { _, _, err := w.State(ctx, ""); return err },
			"Reset empty key":       func() error { return w.Reset(ctx, "") },
			"Layered.Hit empty key": func() error { _, err := l.Hit(ctx, "", 1); return err },
			"Layered.Hit zero":      func() error { _, err := l.Hit(ctx, "k", 0); return err },
			"Layered.Inc zero":      func() error { _, err := l.Inc(ctx, "k", 0); return err },
			"Layered.Refund zero":   func() error { _, err := l.Refund(ctx, "k", 0); return err },
			"Layered.Undo Window's": func() error { return l.Undo(ctx, "k", r, 1) },
			"Layered.Get empty key": func() error { _, err := l.Get(ctx, ""); return err },
			"Layered.Reset empty":   func() error { return l.Reset(ctx, "") },
			"Window bad algorithm":  func() error { _, err := db.Window(ratedb.Algorithm(99), time.Second); return err },
			"Window bad scale":      func() error { _, err := db.Window(ratedb.FixedWindow, time.Microsecond); return err },
			"DB.Layered no tier":    func() error { _, err := db.Layered(ratedb.FixedWindow); return err },
			"DB.Layered bad limit": func() error {
				_, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Second, Limit: -1})
				return err
			},
			"DB.Layered bad algorithm": func() error {
				_, err := db.Layered(ratedb.Algorithm(99), ratedb.Tier{Scale: time.Second})
				return err
			},
		}
		for name, call := range calls {
			err := call()
			assert.ErrorIs(t, err, ratedb.ErrClosed, name)
			assert.NotErrorIs(t, err, ratedb.ErrInvalidArgument, name)
		}
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
