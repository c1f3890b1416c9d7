package redisstate

import (
	"sync/atomic"
	"time"
)

// Clock is the service's clock with --redis: the clock the windows are on
// (redisstore.ServerClock reads Redis's TIME in every script), followed on
// this host. Its reading is this host's wall time at NewClock plus Go's
// monotonic time since (as the service's clock without Redis), shifted by
// the difference last observed between a script's time and this host's
// clock when its answer arrived (Observe, given as redisstore's
// Options.OnTime). So the time until a window's end (reset_in_second,
// duration_until_reset, a peek's Retry-After) is measured on the clock
// that placed the window, however far this host's clock is from Redis's;
// it is behind Redis's by the time the answer took to arrive (well under a
// millisecond on a local network). Before the first answer it reads this
// host's clock. On a Redis Cluster each script reads the TIME of the node
// that holds its key, and a Clock keeps one offset, the last answer's: when
// the nodes' clocks differ, it follows whichever node answered last, so a
// time until a window's end measured on it is off by up to the nodes'
// difference (the APIs still bound it to at least 1 s and at most the
// window). A Clock is safe for concurrent use.
type Clock struct {
	start  time.Time
	offset atomic.Int64 // nanoseconds from this host's clock to the store's
}

// NewClock returns a Clock that reads this host's clock until the first
// Observe.
func NewClock() *Clock { return &Clock{start: time.Now()} }

// local is this host's clock: the wall time at NewClock plus the monotonic
// time since, which no step of the wall clock moves.
func (c *Clock) local() time.Time { return c.start.Add(time.Since(c.start)) }

// Now returns the time on the store's clock.
func (c *Clock) Now() time.Time { return c.local().Add(time.Duration(c.offset.Load())) }

// Observe records that the store's clock read at when a call's answer
// arrived.
func (c *Clock) Observe(at time.Time) { c.offset.Store(int64(at.Sub(c.local()))) }
