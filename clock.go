package ratedb

import (
	"sync/atomic"
	"time"
)

// coarseClock is the default clock: time.Now in Unix milliseconds, stored by
// a ticking goroutine so that reading it costs an atomic load (a clock read
// costs tens of nanoseconds on some machines, a large share of a Hit).
//
// It sleeps after idleTicks ticks without a read: now is then 0 and read
// falls back to time.Now and wakes the ticker.
type coarseClock struct {
	now  atomic.Int64 // Unix ms; 0 while asleep
	used atomic.Bool  // read since the last tick
	wake chan struct{}
}

const idleTicks = 1000

func (c *coarseClock) init() {
	c.wake = make(chan struct{}, 1)
	c.now.Store(time.Now().UnixMilli())
}

// read returns the current time in Unix milliseconds.
func (c *coarseClock) read() int64 {
	if t := c.now.Load(); t != 0 {
		if !c.used.Load() {
			c.used.Store(true)
		}
		return t
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return time.Now().UnixMilli()
}

// tick stores the time and reports whether the clock has been idle for
// idle ticks in a row (idle is the caller's counter).
func (c *coarseClock) tick(idle *int) (sleep bool) {
	if c.used.Swap(false) {
		*idle = 0
	} else if *idle++; *idle >= idleTicks {
		c.now.Store(0)
		return true
	}
	c.now.Store(time.Now().UnixMilli())
	return false
}

// run ticks every millisecond until stop is closed, sleeping while idle.
func (c *coarseClock) run(stop <-chan struct{}) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !c.tick(&idle) {
				continue
			}
			t.Stop()
			select {
			case <-stop:
				return
			case <-c.wake:
			}
			c.now.Store(time.Now().UnixMilli())
			idle = 0
			t.Reset(time.Millisecond)
		}
	}
}
