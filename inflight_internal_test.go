package ratedb

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

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
	clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = w.Inc(ctx, "k", 3)
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
	clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
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
