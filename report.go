package ratedb

import (
	"sync"
	"sync/atomic"
)

// testReportGet, when set by a test before Open, is called with every hash
// the reporter passes to the cache.
var testReportGet func(h uint64)

// reportBatchLen is how many sampled uses a reportBatch carries.
const reportBatchLen = 512

// reportQueueLen is how many full batches wait for the reporter goroutine;
// a batch filled while that many wait is dropped.
const reportQueueLen = 16

// reportBatch is a batch of hashes of hot windows, each standing for a
// sampled use, on its way to the cache's frequency sketch. It holds no
// pointers, so the garbage collector does not scan it.
type reportBatch struct {
	n int
	h [reportBatchLen]uint64
}

// reporter takes uses to the cache's frequency sketch off the hit path:
// the sampled uses of hot windows (every 16th use, see DB.touch), and the
// uses of cold windows that are not offered to the cache (see
// spec.acquire: a flood's new keys, once the cache is full).
//
// The cache counts a use only through Get, which looks the hash up in its
// store before it queues the hash for the sketch. With a million windows
// that look-up misses the CPU cache (about 0.8 µs in a profile of Zipf hits
// on 1,000,000 keys at cfd2f07, and 14% of a hot key's hit): paid on the hit
// path, it was 11% of a hit under Zipf, and a fifth of a flood's new key. A
// hit now appends the hash to a batch
// of its processor (a sync.Pool, as ristretto batches its own reports), and
// full batches go to one goroutine that makes the Gets.
//
// Reports are samples, and like ristretto's own buffers these drop some
// rather than slow a hit down: if the goroutine falls reportQueueLen
// batches behind (a process short of CPU), a batch filled meanwhile is
// dropped and counted (Stats.CacheReportsDropped). The hit that fills it
// holds its entry's lock, so making the batch's Gets there would hold up
// every other call on that key for hundreds of microseconds. A partly
// filled batch waits in its pool for more uses; the pool may drop it at a
// garbage collection, as ristretto's pool may drop its own batches (at most
// reportBatchLen reports a processor).
//
// Safe for concurrent use.
type reporter struct {
	get     func(h uint64) // counts a use of h in the cache (the cache's Get)
	pool    sync.Pool      // *reportBatch, partly filled
	queue   chan *reportBatch
	free    chan *reportBatch // emptied batches, back from run
	dropped atomic.Int64      // reports in batches dropped with the queue full
}

// newReporter returns a reporter that counts uses with get.
func newReporter(get func(h uint64)) *reporter {
	r := &reporter{
		get:   get,
		queue: make(chan *reportBatch, reportQueueLen),
		free:  make(chan *reportBatch, reportQueueLen+1),
	}
	r.pool.New = func() any { return new(reportBatch) }
	return r
}

// report records one sampled use of the window with hash h: it appends h to
// a batch and, when the batch is full, hands it to the goroutine running
// run, or drops it if that goroutine is behind. It never blocks, and
// allocates only while batches are on their way back.
func (r *reporter) report(h uint64) {
	b := r.pool.Get().(*reportBatch)
	b.h[b.n] = h
	if b.n++; b.n == reportBatchLen {
		select {
		case r.queue <- b:
			select {
			case b = <-r.free:
			default:
				b = new(reportBatch)
			}
		default:
			r.dropped.Add(int64(b.n))
			b.n = 0
		}
	}
	r.pool.Put(b)
}

// flush passes every hash of b to get and empties b.
func (b *reportBatch) flush(get func(uint64)) {
	for _, h := range b.h[:b.n] {
		get(h)
	}
	b.n = 0
}

// run passes the hashes of every full batch to get until stop is closed;
// batches still queued then are dropped (the cache is about to close).
func (r *reporter) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case b := <-r.queue:
			b.flush(r.get)
			select {
			case r.free <- b:
			default:
			}
		}
	}
}
