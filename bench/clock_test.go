package bench

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkClock measures what reading the time costs a limiter, and the
// mutex + map floor with each clock (README, "How to read these figures"):
// every peer calls time.Now on every hit; ratedb's default clock is a
// goroutine that stores the time every millisecond, read with one atomic
// load.
func BenchmarkClock(b *testing.B) {
	var coarse atomic.Int64
	coarse.Store(time.Now().UnixNano())
	clocks := []struct {
		name string
		now  func() int64
	}{
		{"time.Now", func() int64 { return time.Now().UnixNano() }},
		{"atomic", coarse.Load},
	}
	for _, c := range clocks {
		b.Run("read/"+c.name, func(b *testing.B) {
			var sink int64
			for b.Loop() {
				sink += c.now()
			}
			if sink == 1 {
				b.Log(sink)
			}
		})
	}
	for _, c := range clocks {
		b.Run("MutexMap_HotKey/"+c.name, func(b *testing.B) {
			l := &clockedMutexMap{m: map[string]*fixedCounter{}, limit: 1 << 40, window: int64(24 * time.Hour), now: c.now}
			for b.Loop() {
				if !l.allow("hot") {
					b.Fatal("denied")
				}
			}
		})
	}
}

// clockedMutexMap is the mutex + map floor (mutexMap) with its clock given.
type clockedMutexMap struct {
	mu     sync.Mutex
	m      map[string]*fixedCounter
	limit  int64
	window int64
	now    func() int64
}

func (l *clockedMutexMap) allow(key string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.m[key]
	if c == nil {
		c = &fixedCounter{}
		l.m[key] = c
	}
	if c.end <= now {
		c.count, c.end = 0, now-now%l.window+l.window
	}
	ok := c.count < l.limit
	if ok {
		c.count++
	}
	return ok
}
