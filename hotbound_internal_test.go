package ratedb

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// strandedHot returns the entries in memory marked hot that the cache does
// not hold: nothing will ever spill them. The cache's buffers must be drained
// (cache.Wait) first.
func strandedHot(db *DB) (n int) {
	for i := range db.shards {
		sh := &db.shards[i]
		sh.mu.Lock()
		for h, e := range sh.m {
			for ; e != nil; e = e.next {
				if !e.hot.Load() {
					continue
				}
				if v, ok := db.cache.Get(h); !ok || v != e {
					n++
				}
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// hitBeforeUncache makes the next uncache first hit key once and let the
// cache apply the hit's Set.
func hitBeforeUncache(t *testing.T, db *DB, w *Window, key string) {
	testBeforeUncache = func() {
		testBeforeUncache = nil
		r, err := w.Hit(context.Background(), key, 10, 1)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		db.cache.Wait()
	}
	t.Cleanup(func() { testBeforeUncache = nil })
}

// Bug 7 of issue 9, made deterministic: a janitor pass removes an expired hot
// window; before the cache forgets it, a hit on the same key creates a new
// entry, which the cache stores in place of the old one. Deleting the hash
// then evicted the new entry without the eviction callback, leaving it hot
// outside the cache for ever.
func TestJanitorDoesNotStrandAHotEntry(t *testing.T) {
	modesInternal(t, func(t *testing.T, path string) {
		clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
		db, err := Open(path, &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
		require.NoError(t, err)
		defer db.Close()
		w, err := db.Window(FixedWindow, time.Second)
		require.NoError(t, err)
		ctx := context.Background()
		_, err = w.Hit(ctx, "k", 10, 1)
		require.NoError(t, err)
		require.NoError(t, db.Snapshot())
		db.cache.Wait()
		clk.Set(clk.Now().Add(time.Second)) // the window has ended

		hitBeforeUncache(t, db, w, "k") // a new window, a new entry
		_, err = db.Clean()
		require.NoError(t, err)
		db.cache.Wait()
		assert.Zero(t, strandedHot(db), "an entry is marked hot but the cache does not hold it")
		n, err := w.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
	})
}

// The same for Reset in memory-only mode, which removes the entry at once.
func TestResetDoesNotStrandAHotEntry(t *testing.T) {
	clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	db, err := Open("", &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Second)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = w.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	db.cache.Wait()
	hitBeforeUncache(t, db, w, "k")
	require.NoError(t, w.Reset(ctx, "k"))
	db.cache.Wait()
	assert.Zero(t, strandedHot(db))
}

// The memory bound of the README (MaxHotKeys plus the windows not yet on
// disk) under concurrent hits, clock moves, Clean and Snapshot: once every
// window is on disk and the cache has settled, at most MaxHotKeys windows
// are in memory and every window marked hot is in the cache.
func TestMemoryBoundUnderJanitorRaces(t *testing.T) {
	clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	const maxHot = 64
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{
		Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: maxHot, NoSync: true,
	})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(FixedWindow, 10*time.Millisecond)
	require.NoError(t, err)
	ctx := context.Background()
	// Widen the gap the deterministic tests above step into.
	testBeforeUncache = func() {
		for range 20 {
			runtime.Gosched()
		}
	}
	t.Cleanup(func() { testBeforeUncache = nil })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := w.Hit(ctx, fmt.Sprint("k", (i*7+g)%72), 1000, 1); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	for range 200 {
		clk.Set(clk.Now().Add(3 * time.Millisecond))
		_, err := db.Clean()
		require.NoError(t, err)
		if err := db.Snapshot(); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	require.NoError(t, db.Snapshot()) // every window on disk
	db.cache.Wait()
	assert.Zero(t, strandedHot(db), "entries marked hot outside the cache")
	assert.LessOrEqual(t, db.Stats().WindowsInMemory, int64(maxHot))
}

// modesInternal runs fn against an in-memory DB and a file-backed one.
func modesInternal(t *testing.T, fn func(t *testing.T, path string)) {
	t.Run("memory", func(t *testing.T) { fn(t, "") })
	t.Run("file", func(t *testing.T) { fn(t, filepath.Join(t.TempDir(), "rate.db")) })
}
