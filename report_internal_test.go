package ratedb

import (
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// Every full batch reaches get once, through the goroutine when it keeps up
// and through the reporting call itself when the goroutine is behind: no
// sampled use is dropped or counted twice.
func TestReporterPassesEveryFullBatchOnce(t *testing.T) {
	if underRace {
		t.Skip("the race detector drops what a sync.Pool holds at random, here partly filled batches")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // a collection may empty the pool
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

	// No goroutine yet: reportQueueLen batches queue, and the call that
	// fills the next one makes its Gets itself.
	const queued = reportQueueLen * reportBatchLen
	h := uint64(0)
	for ; h < queued+reportBatchLen; h++ {
		r.report(h)
	}
	expect(reportBatchLen)
	for i := uint64(queued); i < h; i++ {
		if got[i] != 1 {
			t.Fatalf("use %d, in the batch filled with the queue full, did not reach the cache", i)
		}
	}

	// The goroutine drains the queue while more uses are reported.
	mu.Lock()
	target = int(h) + 10*reportBatchLen
	mu.Unlock()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); r.run(stop) }()
	for ; h < uint64(target); h++ {
		r.report(h)
	}
	select {
	case <-reach:
	case <-time.After(time.Minute):
		t.Fatal("the reporter did not pass the queued batches on within a minute")
	}
	close(stop)
	<-done
	expect(target)

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
