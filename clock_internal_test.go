package ratedb

import (
	"context"
	"testing"
	"time"
)

// TestCoarseClock drives the default clock's tick logic by hand (no sleeping):
// reads keep it awake, idleTicks ticks without a read put it to sleep, and a
// read while asleep still returns the time and wakes the ticker.
func TestCoarseClock(t *testing.T) {
	var c coarseClock
	if err := c.init(); err != nil {
		t.Fatal(err)
	}
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

// The default clock runs on Go's monotonic clock from the wall time at Open:
// a glitch of the wall clock afterwards changes nothing. Before the fix the
// ticker stored time.Now, so a wall clock a day ahead ended every window at
// once (and the DB then held that time).
func TestDefaultClockIgnoresWallGlitches(t *testing.T) {
	db, err := Open("", &Options{SnapshotPeriod: -1, CleanPeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, _ := db.Window(PerKeyWindow, time.Hour) // no boundary can fall between the hits
	ctx := context.Background()
	if r, err := w.Hit(ctx, "k", 1, 1); err != nil || !r.Allowed {
		t.Fatalf("first hit: %+v, %v", r, err)
	}
	wallNow = func() time.Time { return time.Now().Add(24 * time.Hour) }
	defer func() { wallNow = time.Now }()
	idle := 0
	db.coarse.used.Store(true)
	db.coarse.tick(&idle) // the ticker reads the clock
	r, err := w.Hit(ctx, "k", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.RetryAfter > time.Hour {
		t.Fatalf("after a wall-clock glitch of a day: %+v", r)
	}
}
