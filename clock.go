package ratedb

import (
	"fmt"
	"sync/atomic"
	"time"
)

// The DB's clock.
//
// The default clock (Options.Clock nil) reads the wall clock once, at Open,
// and from then on advances with Go's monotonic clock: in-process time is
// the wall time at Open plus the monotonic time elapsed since. A step of the
// wall clock while the DB is open (an NTP step, a hand-set clock, a
// hardware clock kept in local time) therefore changes nothing. An injected
// Options.Clock is taken as given: each reading is used as it is.
//
// Whatever the clock does, a window never ends more than one scale after
// the time it is read at: a stored window that ends later (its clock read
// ahead when it opened, or the clock now reads behind) is capped to end one
// scale after now when a call acquires it (see spec.capEnds). So a key is
// never denied for more than one scale past the moment it would be allowed
// on a correct clock, and a window keeps its count until it ends.

// The clock's range, in Unix milliseconds: from 1970-01-01T00:00:00Z
// (inclusive) to 10000-01-01T00:00:00Z (exclusive). A reading outside it
// gives ErrClockOutOfRange: the end 0 of a stored window means "no window",
// so instants at or before the epoch cannot be windows' ends.
const (
	minTime = int64(0)
	maxTime = int64(253_402_300_800_000)
)

// checkTime returns an error wrapping ErrClockOutOfRange for a reading t
// (Unix ms) outside [minTime, maxTime).
func checkTime(t int64) error {
	if t < minTime || t >= maxTime {
		return fmt.Errorf("%w: the clock reads %s", ErrClockOutOfRange, time.UnixMilli(t).UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// coarseClock is the default clock: the wall time at init plus the
// monotonic time elapsed since, in Unix milliseconds, stored by a ticking
// goroutine so that reading it costs an atomic load (a clock read costs tens
// of nanoseconds on some machines, a large share of a Hit).
//
// It sleeps after idleTicks ticks without a read: now is then 0 and read
// falls back to computing the time and wakes the ticker.
type coarseClock struct {
	start  time.Time    // wall and monotonic reading at init
	base   int64        // start in Unix ms
	now    atomic.Int64 // Unix ms; 0 while asleep
	newest atomic.Int64 // newest reading returned: readings never go backwards
	used   atomic.Bool  // read since the last tick
	wake   chan struct{}
}

const idleTicks = 1000

// wallNow reads the wall clock (with Go's monotonic reading): time.Now, a
// variable so that tests can make the wall clock glitch.
var wallNow = time.Now

// init starts the clock at the wall time now; it fails if that is out of
// range.
func (c *coarseClock) init() error {
	c.wake = make(chan struct{}, 1)
	c.start = wallNow()
	c.base = c.start.UnixMilli()
	if err := checkTime(c.base); err != nil {
		return err
	}
	c.now.Store(c.base)
	return nil
}

// elapsed returns the current time: the wall time at init plus the
// monotonic time since.
func (c *coarseClock) elapsed() int64 {
	return c.base + time.Since(c.start).Milliseconds()
}

// read returns the current time in Unix milliseconds. Readings never go
// backwards, also across goroutines: one that woke the ticker and computed
// the time itself may be a millisecond ahead of the ticker's.
func (c *coarseClock) read() int64 {
	t := c.now.Load()
	if t != 0 {
		if !c.used.Load() {
			c.used.Store(true)
		}
	} else {
		select {
		case c.wake <- struct{}{}:
		default:
		}
		t = c.elapsed()
	}
	for {
		old := c.newest.Load()
		if t <= old {
			return old
		}
		if c.newest.CompareAndSwap(old, t) {
			return t
		}
	}
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
	c.now.Store(c.elapsed())
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
			c.now.Store(c.elapsed())
			idle = 0
			t.Reset(time.Millisecond)
		}
	}
}

// now reads the DB's clock in Unix milliseconds: the default clock, or
// Options.Clock as given. It returns an error wrapping ErrClockOutOfRange
// for a reading outside the clock's range.
func (db *DB) now() (int64, error) {
	var t int64
	if db.clock != nil {
		r := db.clock()
		// UnixMilli is undefined (it wraps) for a reading whose Unix
		// milliseconds do not fit in an int64, about 292 million years
		// from 1970, and can wrap into range: bound the seconds first.
		if s := r.Unix(); s < minTime/1000-1 || s >= maxTime/1000 {
			return 0, fmt.Errorf("%w: the clock reads %s", ErrClockOutOfRange, r.UTC().Format(time.RFC3339Nano))
		}
		t = r.UnixMilli()
	} else {
		t = db.coarse.read()
	}
	if t < minTime || t >= maxTime {
		return 0, checkTime(t)
	}
	return t, nil
}
