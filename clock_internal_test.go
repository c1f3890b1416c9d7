package ratedb

import (
	"testing"
	"time"
)

// TestCoarseClock drives the default clock's tick logic by hand (no sleeping):
// reads keep it awake, idleTicks ticks without a read put it to sleep, and a
// read while asleep still returns the time and wakes the ticker.
func TestCoarseClock(t *testing.T) {
	var c coarseClock
	c.init()
	near := func(got int64) {
		t.Helper()
		if d := time.Now().UnixMilli() - got; d < -1 || d > 50 {
			t.Fatalf("clock reads %d, %d ms from time.Now", got, d)
		}
	}
	near(c.read())

	idle := 0
	if c.tick(&idle) || idle != 0 {
		t.Fatalf("a tick after a read must keep the clock awake (idle %d)", idle)
	}
	for i := 1; i < idleTicks; i++ {
		if c.tick(&idle) {
			t.Fatalf("slept after %d idle ticks", i)
		}
	}
	if !c.tick(&idle) {
		t.Fatal("did not sleep after idleTicks idle ticks")
	}
	if c.now.Load() != 0 {
		t.Fatal("a sleeping clock must publish 0")
	}
	near(c.read())
	select {
	case <-c.wake:
	default:
		t.Fatal("a read while asleep must wake the ticker")
	}

	// run stops when told to, also while asleep.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		c.run(stop)
		close(done)
	}()
	close(stop)
	<-done
}
