package ratedb_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// floodOptions are testOptions with a small hot set and backlog budget.
func floodOptions(c *fakeClock, hot, backlog int64) *ratedb.Options {
	o := testOptions(c)
	o.MaxHotKeys, o.MaxSnapshotBacklog = hot, backlog
	return o
}

// TestBacklogBoundsMemory floods a file-backed DB with distinct new keys
// from several goroutines, with periodic snapshots off, and checks after
// every hit that memory holds at most MaxHotKeys + MaxSnapshotBacklog +
// goroutines windows; then that every count is exact, before and after a
// restart. Without the budget, memory holds every key hit.
func TestBacklogBoundsMemory(t *testing.T) {
	const (
		hot, budget = 64, 256
		goroutines  = 8
		perG        = 800
	)
	c := newClock()
	path := tempPath(t)
	db := openDB(t, path, floodOptions(c, hot, budget))
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	ctx := context.Background()
	key := func(g, i int) string { return fmt.Sprintf("flood-%d-%d", g, i) }

	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				r, err := w.Hit(ctx, key(g, i), 10, 1)
				if err != nil || !r.Allowed || r.Count != 1 {
					errs <- fmt.Errorf("hit %d/%d: allowed=%v count=%d err=%v", g, i, r.Allowed, r.Count, err)
					return
				}
				if m := db.Stats().WindowsInMemory; m > hot+budget+goroutines {
					errs <- fmt.Errorf("after hit %d/%d: %d windows in memory, over %d", g, i, m, hot+budget+goroutines)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := db.Stats()
	assert.Positive(t, st.BacklogWaits, "no hit waited for the backlog")
	assert.Positive(t, st.Snapshots, "no snapshot ran although periodic snapshots are off")
	assert.Equal(t, int64(goroutines*perG), st.Allowed)
	assert.LessOrEqual(t, st.SnapshotBacklog, st.WindowsInMemory, "the backlog counts windows in memory")

	check := func(w *ratedb.Window) {
		t.Helper()
		for g := range goroutines {
			for i := range perG {
				n, err := w.Get(ctx, key(g, i))
				require.NoError(t, err)
				require.Equal(t, int64(1), n, "key %d/%d", g, i)
			}
		}
	}
	check(w)
	require.NoError(t, db.Close())
	db = openDB(t, path, floodOptions(c, hot, budget))
	w, err = db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	check(w)
}

// TestBacklogSnapshotTrigger checks the budget step by step with one
// goroutine and periodic snapshots off: the hits that fill memory to
// MaxHotKeys + MaxSnapshotBacklog windows write nothing; the next hit on a
// new key writes the backlog itself before it counts, and a hit on a window
// already in memory never waits.
func TestBacklogSnapshotTrigger(t *testing.T) {
	const hot, budget = 16, 48
	c := newClock()
	db := openDB(t, tempPath(t), floodOptions(c, hot, budget))
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, db.Snapshot()) // waits for the audit after Open
	for i := range hot + budget {
		_, err := w.Hit(ctx, fmt.Sprintf("k%d", i), 10, 1)
		require.NoError(t, err)
	}
	st := db.Stats()
	require.Equal(t, int64(hot+budget), st.WindowsInMemory)
	require.Equal(t, int64(hot+budget), st.SnapshotBacklog)
	require.Zero(t, st.Snapshots)
	require.Zero(t, st.BacklogWaits)

	// A window already in memory: no wait, no snapshot.
	r, err := w.Hit(ctx, "k0", 10, 1)
	require.NoError(t, err)
	require.Equal(t, int64(2), r.Count)
	require.Zero(t, db.Stats().Snapshots)

	// A new key: the hit writes the backlog first.
	r, err = w.Hit(ctx, "new", 10, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), r.Count)
	st = db.Stats()
	assert.Equal(t, int64(1), st.Snapshots)
	assert.Equal(t, int64(1), st.BacklogWaits)
	assert.Equal(t, int64(hot+budget), st.LastSnapshotWindows)
	assert.Equal(t, int64(1), st.SnapshotBacklog, "only the new key's change is not written")
	assert.Less(t, st.WindowsInMemory, int64(hot+budget))
	for i := range hot + budget {
		n, err := w.Get(ctx, fmt.Sprintf("k%d", i))
		require.NoError(t, err)
		want := int64(1)
		if i == 0 {
			want = 2
		}
		require.Equal(t, want, n, "k%d", i)
	}
}

// TestBacklogBoundsResets resets, one by one, more keys than memory may
// hold, each of them only in the file (the DB was just reopened): a Reset
// brings the key's window into memory, as a tombstone that stays until a
// snapshot has deleted its record, so it waits for room as a hit on a new
// key does. With one caller, memory never holds more than MaxHotKeys +
// MaxSnapshotBacklog windows, and every reset key reads 0, before and after
// a restart.
func TestBacklogBoundsResets(t *testing.T) {
	const hot, budget, keys = 8, 24, 200
	c := newClock()
	path := tempPath(t)
	key := func(i int) string { return fmt.Sprint("reset-", i) }
	db := openDB(t, path, testOptions(c))
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	for i := range keys {
		_, err := w.Inc(ctx, key(i), 3)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	db = openDB(t, path, floodOptions(c, hot, budget))
	w, err = db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	require.Zero(t, db.Stats().WindowsInMemory)
	for i := range keys {
		require.NoError(t, w.Reset(ctx, key(i)))
		require.LessOrEqual(t, db.Stats().WindowsInMemory, int64(hot+budget), "after reset %d", i)
	}
	assert.Positive(t, db.Stats().BacklogWaits, "no reset waited for the backlog")
	check := func(w *ratedb.Window) {
		t.Helper()
		for i := range keys {
			n, err := w.Get(ctx, key(i))
			require.NoError(t, err)
			require.Zero(t, n, "key %d", i)
		}
	}
	check(w)
	require.NoError(t, db.Close())
	db = openDB(t, path, testOptions(c))
	w, err = db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	check(w)
}

// TestBacklogOptionInvalid checks that a negative budget is refused.
func TestBacklogOptionInvalid(t *testing.T) {
	_, err := ratedb.Open(tempPath(t), &ratedb.Options{MaxSnapshotBacklog: -1})
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
}

// TestBacklogWithoutBound checks that math.MaxInt64, "no bound", is a
// backlog that never makes a call wait (MaxHotKeys + MaxSnapshotBacklog
// saturates instead of overflowing to a bound no memory is under).
func TestBacklogWithoutBound(t *testing.T) {
	db := openDB(t, tempPath(t), floodOptions(newClock(), 4, math.MaxInt64))
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		for i := range 100 {
			if _, err := w.Hit(ctx, fmt.Sprint("k", i), 1, 1); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second): // a guard against a hang, not a wait for background work
		t.Fatal("hits on new keys hang with MaxSnapshotBacklog math.MaxInt64")
	}
	st := db.Stats()
	assert.Zero(t, st.BacklogWaits)
	assert.Equal(t, int64(100), st.WindowsInMemory)
	require.NoError(t, db.Close())
}
