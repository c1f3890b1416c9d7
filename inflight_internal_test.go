package ratedb

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A hot window the cache evicts while a snapshot is writing it must stay in
// memory until the transaction commits (the file still holds its older
// state: a call in between would read it), and leave memory once it has:
// the snapshot takes it out after the commit, although it no longer visits
// the windows that were hot when it copied them.
func TestWindowEvictedInFlightLeavesAfterTheCommit(t *testing.T) {
	defer func() { testBatchHook = nil }()
	db, w := openWindow(t, filepath.Join(t.TempDir(), "rate.db"), time.UnixMilli(1_767_225_600_000))
	defer db.Close()
	ctx := context.Background()
	_, err := w.Inc(ctx, "k", 3)
	require.NoError(t, err)
	db.cache.Wait()
	e := entryOf(db, w, "k")
	require.NotNil(t, e)
	require.True(t, e.hot.Load(), "k's window is not hot")

	var during int64 = -1
	var inMemory bool
	testBatchHook = func() error {
		testBatchHook = nil
		db.spill(e) // the cache evicts it: it is in flight
		inMemory = entryOf(db, w, "k") == e
		during, err = w.Get(ctx, "k")
		return err
	}
	require.NoError(t, db.Snapshot())
	assert.True(t, inMemory, "the window left memory before its commit")
	assert.Equal(t, int64(3), during, "Get during the snapshot: the window left memory before its commit")
	assert.Nil(t, entryOf(db, w, "k"), "the evicted window is still in memory after its commit")
	assert.Zero(t, db.Stats().WindowsInMemory)
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(3), n, "Get from the file after the commit")
}

// A snapshot's windows are in flight until the batch that writes them
// commits, and no longer: with one window a batch, while batch j is being
// written exactly the windows of batches j and after are in flight, and
// none is once the snapshot returns.
func TestInFlightEndsWithEachBatch(t *testing.T) {
	defer func(n int) { snapshotBatch, testBatchHook = n, nil }(snapshotBatch)
	snapshotBatch = 1
	db, w := openWindow(t, filepath.Join(t.TempDir(), "rate.db"), time.UnixMilli(1_767_225_600_000))
	defer db.Close()
	ctx := context.Background()
	const n = 12
	es := make([]*entry, n)
	for i := range n {
		key := fmt.Sprint("key-", i)
		_, err := w.Inc(ctx, key, 1)
		require.NoError(t, err)
		es[i] = entryOf(db, w, key)
		require.NotNil(t, es[i])
	}
	inFlight := func() int {
		c := 0
		for _, e := range es {
			e.mu.Lock()
			if db.inflight(e) {
				c++
			}
			e.mu.Unlock()
		}
		return c
	}
	var seen []int
	testBatchHook = func() error {
		seen = append(seen, inFlight())
		return nil
	}
	require.NoError(t, db.Snapshot())
	want := make([]int, n)
	for j := range want {
		want[j] = n - j
	}
	assert.Equal(t, want, seen, "windows in flight while each batch was written")
	assert.Zero(t, inFlight(), "windows in flight after the snapshot")
}

// A batch that fails leaves every window it and the later batches copied
// dirty, even one the cache evicted while it was in flight (it waited on
// the pending list, which the end of the snapshot takes only after the
// windows are dirty again), and those of the batches that committed leave
// memory at once when evicted. Once a snapshot succeeds, all have left
// memory and the file holds every count.
func TestFailedBatchKeepsEvictedWindowsDirty(t *testing.T) {
	defer func(n int) { snapshotBatch, testBatchHook = n, nil }(snapshotBatch)
	snapshotBatch = 1
	db, w := openWindow(t, filepath.Join(t.TempDir(), "rate.db"), time.UnixMilli(1_767_225_600_000))
	defer db.Close()
	ctx := context.Background()
	keys := []string{"a", "b", "c", "d"}
	for i, k := range keys {
		_, err := w.Inc(ctx, k, int64(i+1))
		require.NoError(t, err)
	}
	db.cache.Wait()
	es := make([]*entry, len(keys))
	for i, k := range keys {
		es[i] = entryOf(db, w, k)
		require.NotNil(t, es[i])
		require.True(t, es[i].hot.Load(), "%s's window is not hot", k)
	}
	batches := 0
	testBatchHook = func() error {
		if batches++; batches < 3 {
			return nil
		}
		testBatchHook = nil
		for _, e := range es {
			db.spill(e) // the cache evicts every window: two are written, two in flight
		}
		return errors.New("injected")
	}
	require.Error(t, db.Snapshot())
	left := 0
	for i, e := range es {
		e.mu.Lock()
		if e.gone {
			left++
		} else {
			assert.True(t, e.dirty, "%s: the failed batch left it in memory, clean", keys[i])
		}
		e.mu.Unlock()
	}
	assert.Equal(t, 2, left, "windows that left memory: those of the two committed batches")
	for i, k := range keys {
		n, err := w.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, int64(i+1), n, "Get %s after the failed snapshot", k)
	}
	require.NoError(t, db.Snapshot())
	assert.Zero(t, db.Stats().WindowsInMemory)
	for i, k := range keys {
		n, err := w.Get(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, int64(i+1), n, "Get %s from the file", k)
	}
}

// Snapshot numbers wrap from 1<<31-1 to 1, never to 0 (no stamp) nor into
// the hot bit, and stamping keeps the hot flag. A window whose stale stamp
// the running snapshot's number repeats, and that the cache evicts meanwhile,
// reads as in flight (see inflight), past every frontier of that snapshot:
// it leaves memory at the end of that snapshot, not never.
func TestSnapshotStampsWrap(t *testing.T) {
	defer func() { testBatchHook = nil }()
	db, w := openWindow(t, filepath.Join(t.TempDir(), "rate.db"), time.UnixMilli(1_767_225_600_000))
	defer db.Close()
	ctx := context.Background()
	_, err := w.Inc(ctx, "a", 1)
	require.NoError(t, err)
	db.cache.Wait()
	e := entryOf(db, w, "a")
	require.NotNil(t, e)
	require.True(t, e.hot.Load(), "a's window is not hot")

	db.snapSeq = 1<<31 - 2
	require.NoError(t, db.Snapshot())
	assert.Equal(t, uint32(1<<31-1), e.hot.snap())
	assert.True(t, e.hot.Load(), "the stamp cleared the hot flag")
	_, err = w.Inc(ctx, "a", 1)
	require.NoError(t, err)
	require.NoError(t, db.Snapshot())
	assert.Equal(t, uint32(1), e.hot.snap(), "the number after 1<<31-1")
	assert.True(t, e.hot.Load(), "the stamp cleared the hot flag")

	// The next snapshot is number 1 again and copies only a key that sorts
	// before a, so a lies past the frontier of its one commit too.
	db.snapSeq = 0
	e.mu.Lock()
	ah, _ := db.recordPos(e)
	e.mu.Unlock()
	b := ""
	for i := 0; b == ""; i++ {
		k := fmt.Sprint("b", i)
		if layout.Hash(db.secret, append(append([]byte(nil), w.spec.prefix...), k...)) < ah {
			b = k
		}
	}
	_, err = w.Inc(ctx, b, 1)
	require.NoError(t, err)
	testBatchHook = func() error {
		testBatchHook = nil
		db.spill(e)
		return nil
	}
	require.NoError(t, db.Snapshot())
	assert.Nil(t, entryOf(db, w, "a"), "a window with a stale stamp stayed in memory")
	n, err := w.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
}
