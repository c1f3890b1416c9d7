package ratedb

// Tests added after mutation testing: each fails with one deliberate bug
// that the rest of the suite let through.

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loweredEntry opens a DB whose injected clock reads ten hours ahead, counts
// 3 for key "k" in a minute window and snapshots it (the file's record ends
// ten hours ahead), then sets the clock right (at t0) and counts 1 more: the
// window is capped to end at t0+1m, a lowered end the file does not hold.
func loweredEntry(t *testing.T) (db *DB, w *Window, clk *settableClock, t0 time.Time) {
	t.Helper()
	t0 = time.UnixMilli(1_767_225_600_000)
	clk = &settableClock{t: t0.Add(10 * time.Hour)}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	w, err = db.Window(FixedWindow, time.Minute)
	require.NoError(t, err)
	_, err = w.Inc(context.Background(), "k", 3)
	require.NoError(t, err)
	require.NoError(t, db.Snapshot())
	clk.Set(t0)
	_, err = w.Inc(context.Background(), "k", 1)
	require.NoError(t, err)
	return db, w, clk, t0
}

// A failed snapshot must give back the lowered bit it cleared when it copied
// the entry: otherwise the janitor lets the entry, whose end the clock model
// lowered, leave memory before any snapshot has written it, and the file's
// record, ending later, brings the ended window (and its count) back.
func TestFailedSnapshotKeepsLoweredEnd(t *testing.T) {
	defer func() { testBatchHook = nil }()
	db, w, clk, t0 := loweredEntry(t)
	ctx := context.Background()
	testBatchHook = func() error { return errors.New("disk full") }
	if err := db.Snapshot(); err == nil {
		t.Fatal("snapshot did not fail")
	}
	testBatchHook = nil
	clk.Set(t0.Add(2 * time.Minute)) // the capped window has ended
	if _, err := db.Clean(); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Get(ctx, "k"); err != nil || n != 0 {
		t.Fatalf("Get = %d, %v after the window ended; want 0 (the file's stale record came back)", n, err)
	}
}

// A snapshot that writes an entry whose end the clock model lowered clears
// its lowered bit (the file now ends where memory does): once its window
// has ended, the janitor removes it from memory and file like any other.
func TestSnapshotClearsLoweredEnd(t *testing.T) {
	db, _, clk, t0 := loweredEntry(t)
	if err := db.Snapshot(); err != nil { // writes the lowered end
		t.Fatal(err)
	}
	clk.Set(t0.Add(2 * time.Minute))
	n, err := db.Clean()
	if err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); n != 1 || st.WindowsInMemory != 0 || st.WindowsOnDisk != 0 {
		t.Fatalf("Clean removed %d, windows in memory %d, on disk %d; want 1, 0, 0", n, st.WindowsInMemory, st.WindowsOnDisk)
	}
}

// A cold entry that a snapshot has copied but not yet committed (inflight)
// must stay in memory when a call releases it (release -> dropIfClean, as
// when the cache's Set is dropped): the file does not hold its state until
// the commit, and a call in between would read the older state from the file.
func TestDropIfCleanKeepsInflightEntry(t *testing.T) {
	defer func() { testBatchHook = nil }()
	clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	w, _ := db.Window(FixedWindow, time.Hour)
	if _, err := w.Inc(ctx, "a", 1); err != nil { // fills the cache
		t.Fatal(err)
	}
	if _, err := w.Inc(ctx, "b", 3); err != nil { // fresh, with the cache full: cold
		t.Fatal(err)
	}
	h := w.hash("b")
	sh := db.shard(h)
	sh.mu.Lock()
	e := sh.find(h, w.spec, "b")
	sh.mu.Unlock()
	if e == nil || e.hot.Load() {
		t.Skip("b is not a cold entry in memory")
	}
	var got int64 = -1
	testBatchHook = func() error {
		testBatchHook = nil
		db.dropIfClean(e) // e is inflight: copied, not yet committed
		got, err = w.Get(ctx, "b")
		return err
	}
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if got != 3 {
		t.Fatalf("Get during the snapshot = %d, want 3: the entry left memory before its commit", got)
	}
}

// A legacy Layered record of three tiers whose order is a 3-cycle of the
// sorted one (day, minute, hour): the migration must put given tier i's
// counter at pos[i]. Two tiers cannot tell pos from its inverse (a swap is
// its own inverse).
func TestLayeredLegacyRecordsMigrateThreeTiers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rate.db")
	now := fixtureBase
	const m, h, d = 60_000, 3_600_000, 86_400_000
	old := specPrefix(FixedWindow, []int64{d, m, h}, true)
	ms := now.UnixMilli()
	writeFormat1(t, path, map[string][]counter{
		string(old) + "a": {{Count: 30, End: ms + d}, {Count: 1, End: ms + m}, {Count: 5, End: ms + h}},
	}, nil)
	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	l, err := db.Layered(FixedWindow, Tier{Scale: 24 * time.Hour, Limit: 100}, Tier{Scale: time.Minute, Limit: 10}, Tier{Scale: time.Hour, Limit: 50})
	require.NoError(t, err)
	got, err := l.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{30, 1, 5}, got)
	ends, err := l.ExpiresAt(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{ms + d, ms + m, ms + h}, []int64{ends[0].UnixMilli(), ends[1].UnixMilli(), ends[2].UnixMilli()})
}

// A janitor pass that meets an entry a snapshot has copied but not yet
// committed (inflight) must leave it in memory, even if its window has
// ended: the copy cleared the entry's lowered bit, and if the snapshot then
// fails, only an entry still in memory gets the bit back and is written
// again. Removed meanwhile, it leaves the file's record, which ends later
// (the end the clock model lowered), to bring the ended window and its
// count back.
func TestJanitorKeepsInflightEntryWhoseSnapshotFails(t *testing.T) {
	defer func() { testBatchHook, testBeforeUncache = nil, nil }()
	db, w, clk, t0 := loweredEntry(t)
	memDone := make(chan struct{})
	cleaned := make(chan error, 1)
	testBatchHook = func() error {
		testBatchHook = nil
		// "k" is inflight now. A janitor pass after the capped window has
		// ended runs its memory part, then waits for this snapshot (its
		// file part takes snapMu).
		clk.Set(t0.Add(2 * time.Minute))
		testBeforeUncache = func() {
			testBeforeUncache = nil
			close(memDone)
		}
		go func() {
			_, err := db.Clean()
			cleaned <- err
		}()
		<-memDone
		return errors.New("disk full")
	}
	if err := db.Snapshot(); err == nil {
		t.Fatal("snapshot did not fail")
	}
	require.NoError(t, <-cleaned)
	n, err := w.Get(context.Background(), "k")
	require.NoError(t, err)
	assert.Zero(t, n, "Get after the window ended: the file's stale record came back")
}

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

// A Layered Inc that fails because one tier's count would overflow changes
// no tier: a tier checked before the overflowing one keeps its count.
func TestLayeredIncOverflowChangesNoTier(t *testing.T) {
	t0 := time.UnixMilli(1_767_225_600_000)
	clk := &settableClock{t: t0}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	l, err := db.Layered(FixedWindow, Tier{Scale: time.Minute, Limit: 1}, Tier{Scale: time.Hour, Limit: 1})
	require.NoError(t, err)
	_, err = l.Inc(ctx, "k", maxCount-5)
	require.NoError(t, err)
	clk.Set(t0.Add(time.Minute)) // the minute tier's window has ended, the hour's has not
	_, err = l.Inc(ctx, "k", 10)
	require.ErrorIs(t, err, ErrInvalidArgument)
	got, err := l.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{0, maxCount - 5}, got)
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
