package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"
)

// SteadyResult is the outcome of Steady: one limiter, one access pattern,
// measured for a fixed time after a warm-up.
type SteadyResult struct {
	Limiter  string
	Pattern  string // "roundrobin" or "zipf"
	Keys     int
	Warmup   time.Duration
	Duration time.Duration // measured time (at least the requested one)
	Hits     int64         // hits in the measured time
	NsPerHit float64
	// Snapshots and LastSnapshot (RatedbFile only) are the snapshots that
	// committed during the measured time and the duration of the last one:
	// a snapshot as long as the snapshot period means the snapshot
	// goroutine never rests.
	Snapshots    int64
	LastSnapshot time.Duration
	// PeakWindowsInMemory (ratedb only) is the largest
	// Stats.WindowsInMemory seen, sampled every 65,536 hits.
	PeakWindowsInMemory int64
	// Checked is the number of keys whose counts were found exact after
	// the measurement: every key for a limiter that reports its counts
	// (ratedb, the MutexMap floor, GoLimiter), 0 for the others.
	Checked int
}

// steadyNow is Steady's clock for the midnight check (a variable for the
// tests).
var steadyNow = time.Now

// counter is implemented by the limiters whose counts Steady checks after
// the measurement: Count returns the hits key has counted in the current
// window.
type counter interface {
	Count(key string) (int64, error)
}

// SteadyPatterns lists the access patterns Steady knows.
var SteadyPatterns = []string{"roundrobin", "zipf"}

// Steady builds f holding n keys (each hit once, checked present), then
// hits them from one goroutine in pattern order ("roundrobin": every key in
// turn, so every key changes between two snapshots; "zipf": Zipf(1.1)) for
// warmup, and then for at least dur, timed. Unlike a Go benchmark, whose
// b.N grows until about a second has passed, the measured time covers many
// snapshot periods of a persistent limiter, so its background work runs
// during the measurement. NsPerHit is the hitting goroutine's elapsed time:
// it holds what that work does to the hits (locks, memory traffic,
// garbage), but not the CPU it uses while another CPU is free for it
// (GOMAXPROCS above 1); with GOMAXPROCS 1 that CPU is charged too.
//
// With freshKeys, the timed hits use a second copy of every key, at other
// addresses than the strings that filled the limiter, as a server's
// requests each bring a string of their own: a limiter that keeps the
// string it was first given (a Go map keyed by it) then compares the key
// in memory the hit has not just read, as it would in production. Without
// it, every hit passes the very string the limiter stored, whose bytes the
// hash of the hit has just brought into the cache.
//
// Every timed hit must be allowed, and a limiter that reports its counts
// (ratedb, the MutexMap floor, GoLimiter) must then count every key
// exactly: one for the fill plus the key's hits of the warm-up and the
// measurement, so that a limiter that answered "allowed" without counting
// a hit cannot pass for a fast one (the quota is never reached, so the
// answers alone prove nothing). A wrong count, or a run that crossed
// midnight UTC (a window boundary, which resets the counts), is an error;
// a count found wrong once midnight has passed, while the counts are being
// read, is reported as the crossing, not as the limiter's.
//
// Once ctx ends, the warm-up or measurement stops within 1024 hits and
// Steady returns ctx's error (the fill of the keys is not interrupted).
func Steady(ctx context.Context, f Factory, n int, pattern string, warmup, dur time.Duration, freshKeys bool) (SteadyResult, error) {
	r := SteadyResult{Limiter: f.Name, Pattern: pattern, Keys: n, Warmup: warmup}
	began := steadyNow() // before the fill, whose hit every count holds
	m, closeFn, err := BuildManyKeys(f, n)
	if err != nil {
		return r, err
	}
	defer closeFn()
	keys := m.Keys
	if freshKeys {
		keys = make([]string, len(m.Keys))
		for i, k := range m.Keys {
			keys[i] = strings.Clone(k)
		}
	}
	var order func(i int) string
	// hitsOf returns how many of the first total hits went to each key.
	var hitsOf func(total int) []int64
	switch pattern {
	case "roundrobin":
		order = func(i int) string { return keys[i%len(keys)] }
		hitsOf = func(total int) []int64 {
			c := make([]int64, len(keys))
			for j := range c {
				c[j] = int64(total / len(keys))
				if j < total%len(keys) {
					c[j]++
				}
			}
			return c
		}
	case "zipf":
		mask := len(m.Zipf) - 1
		order = func(i int) string { return keys[m.Zipf[i&mask]] }
		hitsOf = func(total int) []int64 {
			c := make([]int64, len(keys))
			for t, k := range m.Zipf {
				c[k] += int64(total / len(m.Zipf))
				if t < total%len(m.Zipf) {
					c[k]++
				}
			}
			return c
		}
	default:
		return r, fmt.Errorf("bench: unknown pattern %q (want one of %v)", pattern, SteadyPatterns)
	}
	rl, _ := m.L.(*ratedbLimiter)
	i := 0
	// run hits until d has passed, checking the clock every 1024 hits, and
	// returns the hits made and the time taken.
	run := func(d time.Duration) (int64, time.Duration, error) {
		t0 := time.Now()
		var hits int64
		for {
			for range 1024 {
				if ok, err := m.L.Allow(order(i)); err != nil || !ok {
					return hits, 0, fmt.Errorf("%s/%s hit %d: allowed=%v err=%v", f.Name, pattern, i, ok, err)
				}
				if i++; rl != nil && i&0xffff == 0 {
					r.PeakWindowsInMemory = max(r.PeakWindowsInMemory, rl.db.Stats().WindowsInMemory)
				}
			}
			hits += 1024
			if err := ctx.Err(); err != nil {
				return hits, 0, err
			}
			if el := time.Since(t0); el >= d {
				return hits, el, nil
			}
		}
	}
	runtime.GC()
	if _, _, err := run(warmup); err != nil {
		return r, err
	}
	var snaps0 int64
	if rl != nil {
		snaps0 = rl.db.Stats().Snapshots
		r.PeakWindowsInMemory = 0
	}
	if r.Hits, r.Duration, err = run(dur); err != nil {
		return r, err
	}
	r.NsPerHit = float64(r.Duration.Nanoseconds()) / float64(r.Hits)
	if rl != nil {
		st := rl.db.Stats()
		r.Snapshots = st.Snapshots - snaps0
		r.LastSnapshot = st.LastSnapshotDuration
	}
	if c, ok := m.L.(counter); ok {
		crossed := func() error {
			if fixedDayEnd(began) != fixedDayEnd(steadyNow()) {
				return fmt.Errorf("%s/%s: the run crossed midnight UTC (a window boundary): counts reset; run again", f.Name, pattern)
			}
			return nil
		}
		if err := crossed(); err != nil {
			return r, err
		}
		for j, n := range hitsOf(i) {
			got, err := c.Count(m.Keys[j])
			if err != nil {
				return r, fmt.Errorf("%s/%s: count of key %d: %w", f.Name, pattern, j, err)
			}
			if want := 1 + n; got != want {
				// Reading every count takes a while (a million keys, some
				// from the file): midnight may have passed since the check
				// above, and a count read since is of the next window.
				if err := crossed(); err != nil {
					return r, err
				}
				return r, fmt.Errorf("%s/%s: key %d counts %d hits after the run, want %d (1 from the fill, %d timed or warm-up)", f.Name, pattern, j, got, want, n)
			}
			r.Checked++
		}
	}
	return r, nil
}
