package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ratedb/ratedb"
)

// FloodResult is the outcome of Flood.
type FloodResult struct {
	Keys       int   // distinct new keys hit, once each
	MaxHotKeys int64 // ratedb Options.MaxHotKeys
	// Backlog is ratedb Options.MaxSnapshotBacklog (0: its default).
	Backlog    int64
	Goroutines int
	HitTime    time.Duration
	HitsPerSec float64
	// PeakAnonRSS is the largest RssAnon (anonymous resident memory: the
	// heap, not bbolt's file mapping) sampled every 20 ms during the hits
	// and the verification; PeakRSS is VmHWM (all resident memory,
	// including the file mapping) at the end.
	PeakAnonRSS, PeakRSS int64
	// PeakWindowsInMemory is the largest Stats.WindowsInMemory sampled.
	PeakWindowsInMemory int64
	// Slowest is the longest single Hit seen (each goroutine times every
	// 64th hit).
	Slowest     time.Duration
	Stats       ratedb.Stats // after the hits; the error moved to SnapshotErr
	SnapshotErr string
	// Verified keys whose w.Get count is exactly 1; Mismatched those that
	// are not. Every key is checked.
	Verified, Mismatched int
	VerifyTime           time.Duration
}

// floodKey writes key i of a flood ("f" and 15 decimal digits of a
// scrambled i) into buf and returns it as a string that aliases buf: valid
// until buf is written again. ratedb copies the keys it keeps. Keys are
// distinct for distinct i below 2^64/2654435761 (about 6.9e9): there the
// product does not wrap, and a multiplier prime to 10 is a bijection mod
// 10^15. Above it (far more keys than a flood can hold) they may repeat.
func floodKey(buf *[16]byte, i int) string {
	v := (uint64(i)*2654435761 + 12345) % 1_000_000_000_000_000
	buf[0] = 'f'
	for j := 15; j >= 1; j-- {
		buf[j] = byte('0' + v%10)
		v /= 10
	}
	return unsafe.String(&buf[0], len(buf))
}

// Flood opens a ratedb file with maxHot hot windows (and a snapshot backlog
// of backlog windows, 0 for the default) and hits n distinct new keys once
// each, as fast as goroutines goroutines can (0: GOMAXPROCS), the
// way a flood of spoofed addresses or random API keys meets a limiter. It
// samples anonymous RSS throughout, then checks with w.Get that every key
// counts exactly 1 (before Close: the answer the DB gives while running).
// It stops early, with an error wrapping ctx's, once ctx ends.
func Flood(ctx context.Context, dir string, n int, maxHot, backlog int64, goroutines int, logf func(string, ...any)) (FloodResult, error) {
	if goroutines <= 0 {
		goroutines = runtime.GOMAXPROCS(0)
	}
	r := FloodResult{Keys: n, MaxHotKeys: maxHot, Backlog: backlog, Goroutines: goroutines}
	db, err := ratedb.Open(filepath.Join(dir, "flood.db"), &ratedb.Options{MaxHotKeys: maxHot, MaxSnapshotBacklog: backlog})
	if err != nil {
		return r, err
	}
	defer db.Close()
	w, err := db.Window(ratedb.FixedWindow, DefaultWindow)
	if err != nil {
		return r, err
	}
	var peakAnon, peakMem atomic.Int64
	sample := func() {
		if v := procStatus("RssAnon:"); v > peakAnon.Load() {
			peakAnon.Store(v)
		}
		if v := db.Stats().WindowsInMemory; v > peakMem.Load() {
			peakMem.Store(v)
		}
	}
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			sampler.Wait()
		}
	}()

	endBefore := time.Now()
	var next atomic.Int64
	var slowest atomic.Int64
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	t0 := time.Now()
	const chunk = 4096
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf [16]byte
			var slow time.Duration
			defer func() {
				for {
					old := slowest.Load()
					if int64(slow) <= old || slowest.CompareAndSwap(old, int64(slow)) {
						return
					}
				}
			}()
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				for i := lo; i < min(lo+chunk, n); i++ {
					var t1 time.Time
					if i%64 == 0 {
						t1 = time.Now()
					}
					res, err := w.Hit(ctx, floodKey(&buf, i), AllowAll, 1)
					if i%64 == 0 {
						slow = max(slow, time.Since(t1))
					}
					if err != nil {
						errs[g] = fmt.Errorf("flood hit %d: %w", i, err)
						return
					}
					if !res.Allowed || res.Count != 1 {
						errs[g] = fmt.Errorf("flood hit %d: allowed=%v count=%d", i, res.Allowed, res.Count)
						return
					}
					if logf != nil && i > 0 && i%1_000_000 == 0 {
						var ms runtime.MemStats
						runtime.ReadMemStats(&ms)
						logf("flood: %d keys in %v, anon RSS %d MiB (Go heap in use %d MiB, next GC at %d MiB, idle not released %d MiB); %+v",
							i, time.Since(t0).Round(time.Millisecond), procStatus("RssAnon:")>>20,
							ms.HeapInuse>>20, ms.NextGC>>20, (ms.HeapIdle-ms.HeapReleased)>>20, db.Stats())
					}
				}
			}
		}()
	}
	wg.Wait()
	r.HitTime = time.Since(t0)
	r.HitsPerSec = float64(n) / r.HitTime.Seconds()
	r.Slowest = time.Duration(slowest.Load())
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	r.Stats = db.Stats()
	if err := r.Stats.LastSnapshotError; err != nil {
		r.SnapshotErr = err.Error()
		r.Stats.LastSnapshotError = nil
	}
	if logf != nil {
		logf("flood: %d keys in %v (%.0f hits/s), slowest sampled hit %v; %+v", n, r.HitTime, r.HitsPerSec, r.Slowest, r.Stats)
	}
	if r.Stats.Allowed != int64(n) {
		return r, fmt.Errorf("flood: Stats.Allowed %d, want %d", r.Stats.Allowed, n)
	}

	t0 = time.Now()
	var ok, bad atomic.Int64
	next.Store(0)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf [16]byte
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= n {
					return
				}
				for i := lo; i < min(lo+chunk, n); i++ {
					got, err := w.Get(ctx, floodKey(&buf, i))
					if err != nil {
						errs[g] = err
						return
					}
					if got == 1 {
						ok.Add(1)
					} else {
						bad.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	r.VerifyTime = time.Since(t0)
	close(stop)
	sampler.Wait()
	sample()
	r.Verified, r.Mismatched = int(ok.Load()), int(bad.Load())
	r.PeakAnonRSS, r.PeakRSS = peakAnon.Load(), PeakRSS()
	r.PeakWindowsInMemory = peakMem.Load()
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	if logf != nil {
		logf("flood: verified %d keys, %d mismatched, in %v; peak anon RSS %d MiB, peak RSS %d MiB, peak windows in memory %d",
			r.Verified, r.Mismatched, r.VerifyTime, r.PeakAnonRSS>>20, r.PeakRSS>>20, r.PeakWindowsInMemory)
	}
	if fixedDayEnd(endBefore) != fixedDayEnd(time.Now()) {
		return r, fmt.Errorf("the run crossed midnight UTC (a window boundary): counts reset; run again")
	}
	return r, nil
}
