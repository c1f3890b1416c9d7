package ratedb

import (
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// Every full batch reaches get once, through the goroutine; a batch filled
// while reportQueueLen batches wait for it is dropped and counted, never
// passed on by the hit that filled it (which holds an entry's lock). No
// sampled use is counted twice.
func TestReporterPassesEveryFullBatchOnce(t *testing.T) {
	if underRace {
		t.Skip("the race detector drops what a sync.Pool holds at random, here partly filled batches")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a collection may empty the pool
	// One processor: the pool keeps a partly filled batch per processor,
	// and a reporting goroutine moved to another one in mid-batch would
	// leave that batch behind and start another, so fewer batches would
	// fill than the test counts on (it failed so on a loaded machine).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var (
		mu     sync.Mutex
		got    = map[uint64]int{}
		target int
		reach  = make(chan struct{}, 1)
	)
	r := newReporter(func(h uint64) {
		mu.Lock()
		if got[h]++; len(got) == target {
			reach <- struct{}{}
		}
		mu.Unlock()
	})
	expect := func(n int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != n {
			t.Fatalf("%d different uses reached the cache, want %d", len(got), n)
		}
		for h, c := range got {
			if c != 1 {
				t.Fatalf("use %d reached the cache %d times", h, c)
			}
		}
	}

	// No goroutine yet: reportQueueLen batches queue, and the next one
	// filled is dropped.
	const queued = reportQueueLen * reportBatchLen
	h := uint64(0)
	for ; h < queued+reportBatchLen; h++ {
		r.report(h)
	}
	expect(0)
	if n := r.dropped.Load(); n != reportBatchLen {
		t.Fatalf("%d reports dropped with the queue full, want %d", n, reportBatchLen)
	}

	// The goroutine drains the queue, then keeps up with 10 more batches
	// (fewer than the queue holds: none is dropped).
	wait := func() {
		t.Helper()
		select {
		case <-reach:
		case <-time.After(time.Minute):
			t.Fatal("the reporter did not pass the queued batches on within a minute")
		}
	}
	mu.Lock()
	target = queued
	mu.Unlock()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); r.run(stop) }()
	wait()
	mu.Lock()
	target = queued + 10*reportBatchLen
	mu.Unlock()
	for ; h < queued+11*reportBatchLen; h++ {
		r.report(h)
	}
	wait()
	close(stop)
	<-done
	expect(target)
	mu.Lock()
	for i := uint64(queued); i < queued+reportBatchLen; i++ {
		if got[i] != 0 {
			mu.Unlock()
			t.Fatalf("use %d, of the dropped batch, reached the cache", i)
		}
	}
	mu.Unlock()
	if n := r.dropped.Load(); n != reportBatchLen {
		t.Fatalf("%d reports dropped, want %d (the goroutine kept up)", n, reportBatchLen)
	}

	// One use short of a batch stays in the pool.
	for i := 0; i < reportBatchLen-1; i++ {
		r.report(h)
		h++
	}
	expect(target)
}

// Reporting a use allocates nothing while emptied batches come back.
func TestReporterDoesNotAllocate(t *testing.T) {
	if underRace {
		t.Skip("the race detector drops what a sync.Pool holds at random")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a collection may empty the pool
	r := newReporter(func(uint64) {})
	for range reportQueueLen + 1 {
		r.free <- new(reportBatch)
	}
	h := uint64(0)
	allocs := testing.AllocsPerRun(reportQueueLen*reportBatchLen, func() {
		r.report(h)
		h++
		if len(r.queue) > 0 {
			b := <-r.queue // run's part, in this goroutine
			b.flush(r.get)
			r.free <- b
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a report", allocs)
	}
}
