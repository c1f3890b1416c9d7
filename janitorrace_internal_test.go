package ratedb

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// settableClock is a clock a white-box test moves by hand.
type settableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *settableClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// setHook installs fn as testBeforeAcquire for the rest of the test.
func setHook(t *testing.T, fn func()) {
	testBeforeAcquire = fn
	t.Cleanup(func() { testBeforeAcquire = nil })
}

// Bug 0 of issue 9, made deterministic: a hit reads the clock, then a
// janitor pass at a later time removes the key's full window from memory and
// file before the hit takes its locks. A hit that acts at its early reading
// finds no window and counts a fifth hit in a window of limit 4 (before the
// fix: Allowed with ResetAt at the full window's end). Read under the locks,
// the hit's time is the pass's, so it opens the next window.
func TestHitDoesNotActOnAClockReadBeforeAJanitorPass(t *testing.T) {
	for _, alg := range []Algorithm{FixedWindow, StaggeredWindow, PerKeyWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			start := time.UnixMilli(1_767_225_600_000)
			clk := &settableClock{t: start}
			db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
			require.NoError(t, err)
			defer db.Close()
			w, err := db.Window(alg, time.Second)
			require.NoError(t, err)
			ctx := context.Background()
			var full time.Time
			for i := 0; i < 4; i++ {
				r, err := w.Hit(ctx, "k", 4, 1)
				require.NoError(t, err)
				require.True(t, r.Allowed)
				full = r.ResetAt
			}
			require.NoError(t, db.Snapshot())

			ran := false
			var (
				cleaned  int
				cleanErr error
			)
			// The hook runs inside Hit, which holds its call open: it only
			// records, so that a failure cannot leave Close waiting for it.
			setHook(t, func() {
				if ran {
					return
				}
				ran = true
				clk.Set(full) // the full window has just ended ...
				cleaned, cleanErr = db.Clean()
			})
			r, err := w.Hit(ctx, "k", 4, 1)
			require.NoError(t, err)
			require.True(t, ran)
			require.NoError(t, cleanErr)
			require.Equal(t, 1, cleaned) // ... and the pass removed it
			assert.False(t, r.Allowed && r.ResetAt.Equal(full),
				"a fifth hit was admitted in the window ending at %v", full)
			assert.True(t, r.ResetAt.After(full), "the hit acted before the end it read from the clock")
		})
	}
}

// The same interleaving for a Layered limiter.
func TestLayeredHitReadsTheClockUnderTheLock(t *testing.T) {
	start := time.UnixMilli(1_767_225_600_000)
	clk := &settableClock{t: start}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	l, err := db.Layered(FixedWindow, Tier{Scale: time.Second, Limit: 4})
	require.NoError(t, err)
	ctx := context.Background()
	var full time.Time
	for i := 0; i < 4; i++ {
		r, err := l.Hit(ctx, "k", 1)
		require.NoError(t, err)
		full = r.ResetAt
	}
	ran := false
	var cleanErr error
	setHook(t, func() {
		if !ran {
			ran = true
			clk.Set(full)
			_, cleanErr = db.Clean()
		}
	})
	r, err := l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	require.True(t, ran)
	require.NoError(t, cleanErr)
	assert.True(t, r.Allowed)
	assert.True(t, r.ResetAt.After(full), "the layered hit acted on a clock read before the pass")
}

// Two janitor passes at once (Clean called while the background janitor
// runs) counted a window twice: the first took it out of memory and
// counted it, then, before its file part, the second deleted its expired
// record from the file, which it found in neither memory nor its own
// removed set, and counted it again. Passes now run one at a time: here
// the second starts between the first's two parts, and must wait for it.
func TestConcurrentCleanPassesCountAWindowOnce(t *testing.T) {
	start := time.UnixMilli(1_767_225_600_000)
	clk := &settableClock{t: start}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Second)
	require.NoError(t, err)
	ctx := context.Background()
	keys := []string{"k0", "k1", "k2"}
	hitAll := func() {
		for _, k := range keys {
			r, err := w.Hit(ctx, k, 5, 1)
			require.NoError(t, err)
			require.True(t, r.Allowed)
		}
	}
	hitAll()
	require.NoError(t, db.Snapshot()) // the file holds the three windows ...
	hitAll()                          // ... and memory, changed since
	st := db.Stats()
	require.Equal(t, int64(3), st.WindowsInMemory)
	require.Equal(t, int64(3), st.WindowsOnDisk)
	clk.Set(start.Add(2 * time.Second)) // every window has ended

	var (
		ran       atomic.Bool
		waitsOnce sync.Once
		second    = make(chan struct{}) // closed when the second pass returns
		waits     = make(chan struct{}) // closed when it waits for the first
		secondN   int
		secondErr error
	)
	testCleanWaits = func() { waitsOnce.Do(func() { close(waits) }) }
	testBeforeUncache = func() {
		// Between the first pass's memory part and its file part.
		if ran.Swap(true) {
			return
		}
		go func() {
			defer close(second)
			secondN, secondErr = db.Clean()
		}()
		select {
		case <-second: // it ran to the end in between
		case <-waits: // it waits for this one
		}
	}
	t.Cleanup(func() { testCleanWaits, testBeforeUncache = nil, nil })
	firstN, firstErr := db.Clean()
	<-second
	require.NoError(t, firstErr)
	require.NoError(t, secondErr)
	st = db.Stats()
	require.Zero(t, st.WindowsInMemory)
	require.Zero(t, st.WindowsOnDisk)
	assert.Equal(t, 3, firstN+secondN, "windows removed by the two passes (first %d, second %d)", firstN, secondN)
	assert.Equal(t, int64(3), st.Cleaned, "three windows were removed, each counted once")
}
