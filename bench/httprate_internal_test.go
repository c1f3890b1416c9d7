package bench

import (
	"testing"
	"time"
)

// TestHttprateReadsTheClockAsOnLimit: httprate's RateLimiter.OnLimit
// (v0.16.1) reads the clock twice a hit, once for the window it counts in
// and once more, under its mutex, in calculateRate. The harness read it
// once and used that time for both, so every Httprate figure left out one
// time.Now (about 50 ns on the 2-CPU VM, of 100 to 300 ns) that the
// library's own path pays.
func TestHttprateReadsTheClockAsOnLimit(t *testing.T) {
	f, err := FactoryByName("Httprate")
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.New(Config{Limit: 2, Window: DefaultWindow})
	if err != nil {
		t.Fatal(err)
	}
	h := l.(*httprateLimiter)
	reads := 0
	h.now = func() time.Time { reads++; return time.Now() }
	for i, want := range []bool{true, true, false} {
		reads = 0
		ok, err := h.Allow("k")
		if err != nil || ok != want {
			t.Fatalf("hit %d: allowed %v, err %v; want %v", i, ok, err, want)
		}
		if reads != 2 {
			t.Errorf("hit %d read the clock %d times; OnLimit reads it twice", i, reads)
		}
	}
}
