// Package logthrottle bounds how often a kind of log line is written: a
// line that every failed request would write (the store is down) must not
// let clients fill the log at the rate of their requests.
package logthrottle

import (
	"sync"
	"time"
)

// Throttle lets one line through per Period and counts the lines it held
// back, for the next line let through to report. The zero value lets one
// line through a second on the wall clock. It is safe for concurrent use.
type Throttle struct {
	// Period is the least time between two lines let through. Default 1 s.
	Period time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time

	mu   sync.Mutex
	next time.Time // no line before it
	held int64     // lines held back since the last one let through
}

// Allow reports whether a line may be written now and, if so, how many
// were held back since the last one was.
func (t *Throttle) Allow() (ok bool, held int64) {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	period := t.Period
	if period <= 0 {
		period = time.Second
	}
	at := now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.next.IsZero() && at.Before(t.next) {
		t.held++
		return false, 0
	}
	held, t.held, t.next = t.held, 0, at.Add(period)
	return true, held
}
