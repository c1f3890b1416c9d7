package ratedb

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"
)

// When the keys in use change, the new ones must win their place in the
// cache: the cache admits a window only if its use count beats a resident's,
// so every use of a cold window has to be counted. (Before the fix only hot
// windows' uses were counted, so once the cache was full of formerly busy
// windows, new busy ones were rejected on every use and, with a file,
// reloaded from disk after every snapshot.)
func TestNewHotKeysWinTheCache(t *testing.T) {
	db, w := openStill(t, 16)
	ctx := context.Background()
	keys := func(prefix string) (ks []string) {
		for i := 0; i < 16; i++ {
			ks = append(ks, fmt.Sprint(prefix, i))
		}
		return ks
	}
	phase := func(ks []string, rounds int, snapshot bool) (reloads int64) {
		for r := 0; r < rounds; r++ {
			before := db.Stats().Reloaded
			for _, k := range ks {
				if _, err := w.Inc(ctx, k, 1); err != nil {
					t.Fatal(err)
				}
			}
			if snapshot {
				if err := db.Snapshot(); err != nil { // cold windows leave memory
					t.Fatal(err)
				}
			}
			db.cache.Wait()
			reloads = db.Stats().Reloaded - before
		}
		return reloads
	}
	phase(keys("old-"), 20000, false) // busy: the cache counts their uses
	phase(keys("old-"), 1, true)
	if got := phase(keys("new-"), 500, true); got > 2 {
		t.Fatalf("after 500 rounds on 16 new keys, %d of them still reload from the file every round", got)
	}
}

// A flood of one-off keys does not flush the windows in use: with a cache
// full of busy windows, 50 times as many keys used once each, interleaved
// with the busy ones, leave nearly all of the busy ones in the cache.
func TestOneOffKeysDoNotFlushTheCache(t *testing.T) {
	hot, spilled := floodBusyCache(t, 20, 1)
	t.Logf("%d of %d busy windows still in the cache; %d spilled", hot, floodBusy, spilled)
	if hot < floodBusy*95/100 {
		t.Fatalf("only %d of %d busy windows are still in the cache after the one-off keys", hot, floodBusy)
	}
}

// floodBusy is how many busy windows floodBusyCache fills a cache of 1,000
// with.
const floodBusy = 900

// floodBusyCache fills a cache of 1,000 windows with floodBusy busy ones,
// each used busyUses times, then uses 50 times as many new keys uses times
// each, every new key followed by one use of a busy window (a snapshot
// every 1,000 keys lets cold windows leave memory). It returns how many
// busy windows are still in the cache, and Stats.Spilled.
func floodBusyCache(t *testing.T, busyUses, uses int) (hot int, spilled int64) {
	t.Helper()
	now := time.UnixMilli(1_767_225_600_000)
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{
		Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, _ := db.Window(FixedWindow, time.Hour)
	ctx := context.Background()
	inc := func(k string) {
		if _, err := w.Inc(ctx, k, 1); err != nil {
			t.Fatal(err)
		}
	}
	busy := make([]string, floodBusy)
	for i := range busy {
		busy[i] = fmt.Sprint("busy-", i)
	}
	for range busyUses {
		for i, k := range busy {
			inc(k)
			if i%16 == 0 {
				settleReports(t, db)
			}
		}
	}
	db.cache.Wait()
	for i := range 50 * len(busy) {
		if i%16 == 0 {
			settleReports(t, db)
		}
		k := fmt.Sprint("new-", i)
		for range uses {
			inc(k)
		}
		inc(busy[i%len(busy)])
		if i%1000 == 0 {
			if err := db.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	}
	db.cache.Wait()
	for _, k := range busy {
		if _, ok := db.cache.Get(w.hash(k)); ok {
			hot++
		}
	}
	return hot, db.Stats().Spilled
}

// settleReports waits until the reports of uses made so far have left the
// queues that drop what arrives while they are full: the reporter's queue of
// full batches (reportQueueLen) and the cache policy's channel of full
// stripes (3 stripes of BufferItems = 64 hashes; an unexported field of
// ristretto v2, read by reflection). Called every 16 uses of a new key (at
// most about 50 reports), the flood then never outruns the goroutines that
// empty those queues, so no report is dropped for want of CPU. Without it
// the flood measured how much CPU those goroutines got: beside CPU hogs at
// GOMAXPROCS 1, TestKeysUsedTwiceDoNotFlushTheCache kept 250 to 590 busy
// windows of 900 and failed 10 runs of 25. It polls (yielding the
// processor, not sleeping) for at most a minute, a guard against a hang.
func settleReports(t *testing.T, db *DB) {
	t.Helper()
	policy := reflect.ValueOf(db.cache).Elem().FieldByName("cachePolicy")
	if !policy.IsValid() || policy.IsNil() {
		t.Fatal("ristretto's Cache has no cachePolicy field: settleReports needs updating")
	}
	items := policy.Elem().FieldByName("itemsCh")
	if !items.IsValid() || items.Kind() != reflect.Chan {
		t.Fatal("ristretto's policy has no itemsCh channel: settleReports needs updating")
	}
	deadline := time.Now().Add(time.Minute)
	for len(db.reports.queue) > 0 || items.Len() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cache's reports were not taken in a minute")
		}
		runtime.Gosched()
	}
}

// While memory holds fewer than MaxHotKeys windows, a new window goes into
// the cache at its first use; once it holds MaxHotKeys, a new window waits
// for its second use, and then goes in.
func TestNewWindowOfferedAtFirstUseOnlyWithRoom(t *testing.T) {
	db, w := openStill(t, 10)
	ctx := context.Background()
	hot := func(k string) bool {
		h := w.hash(k)
		sh := db.shard(h)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		e := sh.find(h, w.spec, k)
		return e != nil && e.hot.Load()
	}
	for i := range 10 {
		k := fmt.Sprint("room-", i)
		if _, err := w.Inc(ctx, k, 1); err != nil {
			t.Fatal(err)
		}
		if !hot(k) {
			t.Fatalf("window %d of 10 not offered at its first use", i)
		}
	}
	if _, err := w.Inc(ctx, "full", 1); err != nil {
		t.Fatal(err)
	}
	if hot("full") {
		t.Fatal("a new window was offered at its first use with MaxHotKeys windows in memory")
	}
	if _, err := w.Inc(ctx, "full", 1); err != nil {
		t.Fatal(err)
	}
	if !hot("full") {
		t.Fatal("a new window was not offered at its second use")
	}
	db.cache.Wait()
	// The cache is full of windows used once or twice, and the cold ones
	// leave memory once written: new windows still wait for their second
	// use (each offer would evict a resident, whose leaving would make
	// room in memory for the next one).
	for i := range 20 {
		k := fmt.Sprint("later-", i)
		if _, err := w.Inc(ctx, k, 1); err != nil {
			t.Fatal(err)
		}
		if hot(k) {
			t.Fatalf("new window %d offered at its first use with the cache full", i)
		}
		if err := db.Snapshot(); err != nil {
			t.Fatal(err)
		}
		db.cache.Wait()
	}
}

// Keys used twice each are offered to a full cache at their second use,
// where TinyLFU prefers busy windows only in part: the fast table reports a
// hot window's every 16th use to the cache's frequency sketch, a cold
// window reports every use, and the cold reports age the sketch. With a
// cache full of busy windows used 100 times each, 50 times as many keys
// used twice each, interleaved with the busy ones, leave about 70% of the
// busy ones in the cache (measured 64 to 77%; README, How it works). The
// test holds that level: at least 55%. (Measured and not landed: cold
// uses reported at the hot rate, 40 to 50%; cold windows offered only at a
// sample of their uses, about 50%; both, 78 to 88%, but then
// TestNewHotKeysWinTheCache failed often.)
//
// Uses are samples: with the process short of CPU (other test packages on
// both cores), the cache's buffers and ours drop some, and a run kept 481
// (53%); beside CPU hogs at GOMAXPROCS 1, runs kept 250 to 590 and the test
// failed 10 times in 25. floodBusyCache now waits for those buffers
// (settleReports), so no report is dropped for want of CPU: beside the
// same hogs, runs kept 643 to 679 at GOMAXPROCS 1 and 559 to 668 at 2 and
// 4 (the rest is TinyLFU's own sampling). The test still takes the best of
// three runs, which a mechanism that lost its protection would not pass.
func TestKeysUsedTwiceDoNotFlushTheCache(t *testing.T) {
	if underRace {
		t.Skip("the race detector empties the pool where the cache batches its sketch's reports")
	}
	best := 0
	for run := range 3 {
		hot, spilled := floodBusyCache(t, 100, 2)
		t.Logf("run %d: %d of %d busy windows still in the cache; %d spilled", run, hot, floodBusy, spilled)
		if best = max(best, hot); best >= floodBusy*55/100 {
			return
		}
	}
	t.Fatalf("at best %d of %d busy windows were still in the cache after the keys used twice", best, floodBusy)
}

// A new window's first use while the cache is full (it is not offered, see
// acquire) is counted in the cache's frequency sketch through the reporter,
// off the hit path, and not by a Get on it: made there, under the shard's
// lock, the Get's look-up in the cache's store missed the CPU cache and was
// a fifth of a flood's new key (BenchmarkFlood).
func TestUnofferedUseGoesThroughTheReporter(t *testing.T) {
	if underRace {
		t.Skip("the race detector empties the pool where the reporter batches its reports")
	}
	var (
		mu  sync.Mutex
		got = map[uint64]bool{}
	)
	testReportGet = func(h uint64) {
		mu.Lock()
		got[h] = true
		mu.Unlock()
	}
	t.Cleanup(func() { testReportGet = nil }) // after the DB closes (cleanups run last first)
	db, w := openStill(t, 16)
	ctx := context.Background()
	for i := range 16 {
		if _, err := w.Hit(ctx, fmt.Sprint("busy-", i), 100, 1); err != nil {
			t.Fatal(err)
		}
	}
	db.cache.Wait()
	if hot := db.hotWindows.Load(); hot != 16 {
		t.Fatalf("%d hot windows after 16 keys, want the cache full (16)", hot)
	}
	const fresh = 4096
	hs := make([]uint64, fresh)
	for i := range hs {
		k := fmt.Sprint("new-", i)
		hs[i] = w.hash(k)
		if _, err := w.Hit(ctx, k, 100, 1); err != nil {
			t.Fatal(err)
		}
	}
	if hot := db.hotWindows.Load(); hot != 16 {
		t.Fatalf("%d hot windows after the new keys, want 16: a new key was offered at its first use", hot)
	}
	// Every full batch of 512 reaches the reporter's goroutine (none is
	// dropped: one goroutine fills them); a partly filled one per
	// processor stays in its pool, and a garbage collection may drop one.
	// Poll, yielding the processor, for at most 20 seconds.
	count := func() (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, h := range hs {
			if got[h] {
				n++
			}
		}
		return n
	}
	want := fresh / 2
	for deadline := time.Now().Add(20 * time.Second); count() < want; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d first uses reached the cache through the reporter, want at least %d", count(), fresh, want)
		}
	}
}

// openStill opens a file DB of maxHot hot windows whose clock stands still
// and which runs no snapshot or janitor pass of its own, and its one-hour
// FixedWindow; the test's cleanup closes it.
func openStill(t *testing.T, maxHot int64) (*DB, *Window) {
	t.Helper()
	now := time.UnixMilli(1_767_225_600_000)
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{
		Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: maxHot,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	w, err := db.Window(FixedWindow, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return db, w
}
