package ratedb

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blockCacheGoroutine makes the cache's goroutine wait, before it applies
// anything queued after this call, until the returned function is called: it
// queues a Set that the cache rejects, whose spill then waits for the lock of
// key other's shard, which it holds meanwhile. other must be hot in the cache.
func blockCacheGoroutine(t *testing.T, db *DB, w *Window, other string) (release func()) {
	h := w.hash(other)
	sh := db.shard(h)
	sh.mu.Lock()
	// A second entry of the same hash, never in memory: the store holds
	// other's entry, so this Set is queued as a new item, which the policy
	// rejects (the key is there), calling spill.
	dummy := w.newEntry(other, []counter{{}})
	require.True(t, db.cache.Set(h, dummy, 1))
	return sh.mu.Unlock
}

// cacheHoldsGone reports whether the cache's store holds, for key's hash, an
// entry that is not in memory or is marked cold.
func cacheHoldsGone(db *DB, w *Window, key string) (gone, cold bool) {
	h := w.hash(key)
	v, ok := db.cache.Get(h)
	if !ok {
		return false, false
	}
	sh := db.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return v.gone, !v.hot.Load()
}

// entryOf returns key's entry in memory, or nil.
func entryOf(db *DB, w *Window, key string) *entry {
	h := w.hash(key)
	sh := db.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.find(h, w.spec, key)
}

// The ordering the reviewer suspected: a janitor pass removes an expired
// hot window of key k; before uncache, a hit on k creates a new entry e2 and
// offers it (Set A, a new item: the store still holds the old entry). While
// A is still in the cache's buffer, uncache deletes the hash (D) and, e2
// being marked hot, offers it again (Set B). The cache applies A (rejected:
// the policy still holds the hash, so spill marks e2 cold), D, then B
// (admitted: the store now holds e2, marked cold). A snapshot then writes e2
// and, e2 being cold, takes it out of memory without telling the cache: the
// store holds a gone entry, and every later offer for k is rejected.
//
// In memory-only mode the cold e2 leaves memory when the janitor removes it
// (cold, so without a Del), unless a hit offers it again first.
func TestCacheNeverHoldsAGoneEntry(t *testing.T) {
	modesInternal(t, testCacheNeverHoldsAGoneEntry)
}

func testCacheNeverHoldsAGoneEntry(t *testing.T, path string) {
	clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	db, err := Open(path, &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Second)
	require.NoError(t, err)
	ctx := context.Background()
	other := "other"
	for i := 0; w.hash(other)%numShards == w.hash("k")%numShards; i++ {
		other = "other" + string(rune('a'+i))
	}
	_, err = w.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	require.NoError(t, db.Snapshot())
	db.cache.Wait()
	clk.Set(clk.Now().Add(time.Second)) // k's window has ended
	// other is hot and, not in the file, untouched by the janitor's pass
	// over the file, which takes the shard locks of the keys it finds there.
	_, err = w.Hit(ctx, other, 10, 1)
	require.NoError(t, err)
	db.cache.Wait()

	var release func()
	testBeforeUncache = func() {
		testBeforeUncache = nil
		release = blockCacheGoroutine(t, db, w, other)
		r, err := w.Hit(ctx, "k", 10, 1) // Set A, still queued
		require.NoError(t, err)
		require.True(t, r.Allowed)
	}
	t.Cleanup(func() { testBeforeUncache = nil })
	_, err = db.Clean()
	require.NoError(t, err)
	release()
	db.cache.Wait()

	e2 := entryOf(db, w, "k")
	require.NotNil(t, e2)
	gone, cold := cacheHoldsGone(db, w, "k")
	t.Logf("after Clean: e2 hot=%v, cache holds k's entry: gone=%v cold=%v", e2.hot.Load(), gone, cold)

	if db.persist {
		require.NoError(t, db.Snapshot()) // writes e2; a cold e2 leaves memory
	} else {
		clk.Set(clk.Now().Add(time.Second)) // e2's window has ended
		_, err = db.Clean()                 // a cold e2 leaves memory
		require.NoError(t, err)
	}
	db.cache.Wait()
	gone, cold = cacheHoldsGone(db, w, "k")
	t.Logf("after e2 may leave memory: k in memory=%v, cache holds k's entry: gone=%v cold=%v", entryOf(db, w, "k") != nil, gone, cold)
	assert.False(t, gone, "the cache holds an entry that has left memory")

	// The consequence: k is never admitted again.
	st0 := db.Stats()
	const n = 20
	hotAfter := 0
	for i := range n {
		_, err := w.Hit(ctx, "k", 1000, 1) // allowed: the entry turns dirty
		require.NoError(t, err)
		db.cache.Wait()
		if e := entryOf(db, w, "k"); e != nil && e.hot.Load() {
			hotAfter++
		}
		if i%5 == 4 && db.persist {
			require.NoError(t, db.Snapshot())
			db.cache.Wait()
		}
	}
	st1 := db.Stats()
	t.Logf("%d allowed hits: hot after %d, spilled +%d, reloaded +%d", n, hotAfter, st1.Spilled-st0.Spilled, st1.Reloaded-st0.Reloaded)
	for range n {
		_, err := w.Hit(ctx, "k", 1, 1) // denied: the entry stays clean
		require.NoError(t, err)
		db.cache.Wait()
	}
	st2 := db.Stats()
	t.Logf("%d denied hits: spilled +%d, reloaded +%d", n, st2.Spilled-st1.Spilled, st2.Reloaded-st1.Reloaded)
	assert.Greater(t, hotAfter, n/2, "k stays out of the cache")
	assert.LessOrEqual(t, st2.Reloaded-st1.Reloaded, int64(1), "denied hits read the file")
	c, err := w.Get(ctx, "k")
	require.NoError(t, err)
	want := int64(n)
	if db.persist {
		want++ // e2's hit: its window has not ended
	}
	assert.Equal(t, want, c, "counts stay exact")
}
