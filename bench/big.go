package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ratedb/ratedb"
)

// BeyondResult is the outcome of BeyondMemory.
type BeyondResult struct {
	Windows    int           // distinct live windows
	MaxHotKeys int64         // ratedb Options.MaxHotKeys
	FillTime   time.Duration // hitting each window once
	Hits       int           // timed Zipf hits
	HitTime    time.Duration
	HitsPerSec float64
	// PeakRSS is VmHWM read right after the timed hits; it includes the
	// benchmark's own key arena (ArenaBytes) and Zipf sequence (SeqBytes).
	PeakRSS int64
	// RSSAnon and RSSFile split the resident set right after the timed
	// hits: anonymous memory (heap) and file-backed pages (bbolt's mmap of
	// the database file).
	RSSAnon, RSSFile int64
	ArenaBytes       int64
	SeqBytes         int64
	Stats            ratedb.Stats // after the timed hits; Stats.LastSnapshotError is moved to SnapshotErr
	// SnapshotErr is the text of Stats.LastSnapshotError ("" if none), kept
	// apart because an error value does not survive JSON.
	SnapshotErr string
	// Verified windows whose w.Get count matched what was hit; Mismatched
	// those that did not. Every window is checked unless Quick.
	Verified, Mismatched int
	VerifyTime           time.Duration

	// Restart: the file after Close, reopened.
	FileBytes       int64
	WindowsOnDisk   int64
	BytesPerWindow  float64
	CloseTime       time.Duration
	OpenTime        time.Duration
	FirstHit        time.Duration // Open returned -> first Hit (an existing, cold key) returned
	FirstHitNewKey  time.Duration
	Audited         time.Duration // Open began -> the page audit after Open was done (a Snapshot waits for it)
	RestartVerified int           // windows checked exact after the reopen
	RestartMismatch int
}

// BeyondMemory opens a ratedb file with maxHot hot windows, hits n distinct
// keys once each, then times hits Zipf(1.1)-distributed keys over them,
// verifies every count (or a sample of verifySample windows if > 0), closes,
// and reopens the file to time Open and the first Hit. Once ctx ends, its
// next Hit or Get fails and it returns that error.
func BeyondMemory(ctx context.Context, dir string, n int, maxHot int64, hits int, verifySample int, logf func(string, ...any)) (BeyondResult, error) {
	r := BeyondResult{Windows: n, MaxHotKeys: maxHot, Hits: hits}
	arena := NewArena(n)
	r.ArenaBytes = int64(arena.Bytes())
	seqLen := 1 << 22
	seq := ZipfSequence(n, seqLen)
	r.SeqBytes = int64(len(seq) * 4)
	mask := seqLen - 1
	path := filepath.Join(dir, "beyond.db")
	db, err := ratedb.Open(path, &ratedb.Options{MaxHotKeys: maxHot})
	if err != nil {
		return r, err
	}
	w, err := db.Window(ratedb.FixedWindow, DefaultWindow)
	if err != nil {
		return r, err
	}
	endBefore := time.Now()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if res, err := w.Hit(ctx, arena.Key(i), AllowAll, 1); err != nil || !res.Allowed {
			return r, fmt.Errorf("fill %d: allowed=%v err=%v", i, res.Allowed, err)
		}
		if logf != nil && i > 0 && i%1_000_000 == 0 {
			logf("beyond: filled %d windows in %v, RSS %d MiB", i, time.Since(t0).Round(time.Millisecond), RSS()>>20)
		}
	}
	r.FillTime = time.Since(t0)
	if logf != nil {
		logf("beyond: fill done in %v; %+v", r.FillTime, db.Stats())
	}
	t0 = time.Now()
	for i := 0; i < hits; i++ {
		if res, err := w.Hit(ctx, arena.Key(int(seq[i&mask])), AllowAll, 1); err != nil || !res.Allowed {
			return r, fmt.Errorf("zipf hit %d: allowed=%v err=%v", i, res.Allowed, err)
		}
	}
	r.HitTime = time.Since(t0)
	r.HitsPerSec = float64(hits) / r.HitTime.Seconds()
	r.PeakRSS = PeakRSS()
	r.RSSAnon, r.RSSFile = procStatus("RssAnon:"), procStatus("RssFile:")
	r.Stats = db.Stats()
	if err := r.Stats.LastSnapshotError; err != nil {
		r.SnapshotErr = err.Error()
		r.Stats.LastSnapshotError = nil
	}
	if logf != nil {
		logf("beyond: %d hits in %v (%.0f/s), peak RSS %d MiB (now anon %d MiB, file %d MiB); %+v", hits, r.HitTime, r.HitsPerSec, r.PeakRSS>>20, r.RSSAnon>>20, r.RSSFile>>20, r.Stats)
	}
	if fixedDayEnd(endBefore) != fixedDayEnd(time.Now()) {
		return r, fmt.Errorf("the run crossed midnight UTC (a window boundary): counts reset; run again")
	}

	// Expected counts: 1 from the fill plus the Zipf occurrences.
	want := make([]uint32, n)
	for i := range want {
		want[i] = 1
	}
	for i := 0; i < hits; i++ {
		want[seq[i&mask]]++
	}
	check := func(w *ratedb.Window) (ok, bad int, err error) {
		idx := func(j int) int { return j }
		m := n
		if verifySample > 0 && verifySample < n {
			m = verifySample
			step := n / verifySample
			idx = func(j int) int { return j * step }
		}
		for j := 0; j < m; j++ {
			i := idx(j)
			got, err := w.Get(ctx, arena.Key(i))
			if err != nil {
				return ok, bad, err
			}
			if got == int64(want[i]) {
				ok++
			} else {
				bad++
			}
		}
		return ok, bad, nil
	}
	t0 = time.Now()
	r.Verified, r.Mismatched, err = check(w)
	r.VerifyTime = time.Since(t0)
	if err != nil {
		return r, err
	}
	if logf != nil {
		logf("beyond: verified %d windows, %d mismatched, in %v", r.Verified, r.Mismatched, r.VerifyTime)
	}

	t0 = time.Now()
	if err := db.Close(); err != nil {
		return r, err
	}
	r.CloseTime = time.Since(t0)
	r.WindowsOnDisk = db.Stats().WindowsOnDisk
	fi, err := os.Stat(path)
	if err != nil {
		return r, err
	}
	r.FileBytes = fi.Size()
	if r.WindowsOnDisk > 0 {
		r.BytesPerWindow = float64(r.FileBytes) / float64(r.WindowsOnDisk)
	}
	runtime.GC()

	t0 = time.Now()
	db, err = ratedb.Open(path, &ratedb.Options{MaxHotKeys: maxHot})
	if err != nil {
		return r, err
	}
	defer db.Close()
	w, err = db.Window(ratedb.FixedWindow, DefaultWindow)
	if err != nil {
		return r, err
	}
	opened := time.Now()
	r.OpenTime = opened.Sub(t0)
	// The coldest key of the Zipf order is unlikely to have been touched by
	// the timed hits; any key is cold after a reopen.
	k := n / 2
	res, err := w.Hit(ctx, arena.Key(k), AllowAll, 1)
	r.FirstHit = time.Since(opened)
	if err != nil {
		return r, err
	}
	if res.Count != int64(want[k])+1 {
		return r, fmt.Errorf("after reopen, key %d count %d, want %d", k, res.Count, want[k]+1)
	}
	want[k]++
	t1 := time.Now()
	if _, err := w.Hit(ctx, "w-new-key-after-reopen", AllowAll, 1); err != nil {
		return r, err
	}
	r.FirstHitNewKey = time.Since(t1)
	if err := db.Snapshot(); err != nil {
		return r, err
	}
	r.Audited = time.Since(t0)
	sample := 100_000
	if verifySample > 0 {
		sample = min(sample, verifySample)
	}
	r.RestartVerified, r.RestartMismatch, err = check2(ctx, w, arena, want, sample)
	if logf != nil {
		logf("beyond: reopen %v, first hit %v, new key %v, audit done %v after Open began, file %d B (%.1f B/window), restart check %d ok %d bad",
			r.OpenTime, r.FirstHit, r.FirstHitNewKey, r.Audited, r.FileBytes, r.BytesPerWindow, r.RestartVerified, r.RestartMismatch)
	}
	return r, err
}

// check2 verifies sample windows spread over the arena against want.
func check2(ctx context.Context, w *ratedb.Window, a *Arena, want []uint32, sample int) (ok, bad int, err error) {
	step := max(1, a.Len()/sample)
	for i := 0; i < a.Len(); i += step {
		got, err := w.Get(ctx, a.Key(i))
		if err != nil {
			return ok, bad, err
		}
		if got == int64(want[i]) {
			ok++
		} else {
			bad++
		}
	}
	return ok, bad, nil
}

func fixedDayEnd(t time.Time) int64 {
	ms := t.UnixMilli()
	d := DefaultWindow.Milliseconds()
	return ms - ms%d + d
}

// SnapshotResult is the throughput of one db.Snapshot call.
type SnapshotResult struct {
	Windows    int // changed windows the snapshot wrote
	Insert     time.Duration
	InsertRate float64 // windows/s, first snapshot of new windows
	Update     time.Duration
	UpdateRate float64 // windows/s, every window changed again
}

// SnapshotThroughput fills n windows in a fresh file (periodic snapshots
// off), times db.Snapshot() writing them, changes all n again and times the
// next snapshot.
func SnapshotThroughput(dir string, n int) (SnapshotResult, error) {
	ctx := context.Background()
	r := SnapshotResult{Windows: n}
	keys := Keys(n)
	db, w, err := openSnapDB(dir, fmt.Sprintf("snap-%d.db", n))
	if err != nil {
		return r, err
	}
	defer db.Close()
	hitAll := func() error {
		for _, k := range keys {
			if _, err := w.Hit(ctx, k, AllowAll, 1); err != nil {
				return err
			}
		}
		return nil
	}
	timeSnap := func() (time.Duration, error) {
		runtime.GC()
		t0 := time.Now()
		if err := db.Snapshot(); err != nil {
			return 0, err
		}
		d := time.Since(t0)
		if got := db.Stats().LastSnapshotWindows; got != int64(n) {
			return d, fmt.Errorf("snapshot wrote %d windows, want %d", got, n)
		}
		return d, nil
	}
	if err := hitAll(); err != nil {
		return r, err
	}
	if r.Insert, err = timeSnap(); err != nil {
		return r, err
	}
	if err := hitAll(); err != nil {
		return r, err
	}
	if r.Update, err = timeSnap(); err != nil {
		return r, err
	}
	r.InsertRate = float64(n) / r.Insert.Seconds()
	r.UpdateRate = float64(n) / r.Update.Seconds()
	return r, nil
}

func openSnapDB(dir, name string) (*ratedb.DB, *ratedb.Window, error) {
	db, err := ratedb.Open(filepath.Join(dir, name), &ratedb.Options{SnapshotPeriod: -1})
	if err != nil {
		return nil, nil, err
	}
	w, err := db.Window(ratedb.FixedWindow, DefaultWindow)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return db, w, nil
}

// Latency summarises per-Hit latencies.
type Latency struct {
	N                   int
	P50, P99, P999, Max time.Duration
}

func summarize(d []time.Duration) Latency {
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return Latency{N: len(d), P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: d[len(d)-1]}
}

// SnapshotLatencyResult compares Hit latency while a snapshot of Windows
// changed windows runs against Hit latency with no snapshot running.
type SnapshotLatencyResult struct {
	Windows      int
	SnapshotTime time.Duration
	During, Idle Latency
}

// SnapshotLatency fills n windows, snapshots them, changes all n again, then
// times single Hits (round-robin over the n keys, one goroutine; each
// sample includes two clock reads) while db.Snapshot() writes them on another
// goroutine, and then the same number of Hits with nothing else running.
func SnapshotLatency(dir string, n int) (SnapshotLatencyResult, error) {
	ctx := context.Background()
	r := SnapshotLatencyResult{Windows: n}
	keys := Keys(n)
	db, w, err := openSnapDB(dir, fmt.Sprintf("lat-%d.db", n))
	if err != nil {
		return r, err
	}
	defer db.Close()
	for _, k := range keys {
		if _, err := w.Hit(ctx, k, AllowAll, 1); err != nil {
			return r, err
		}
	}
	if err := db.Snapshot(); err != nil {
		return r, err
	}
	for _, k := range keys {
		if _, err := w.Hit(ctx, k, AllowAll, 1); err != nil {
			return r, err
		}
	}
	runtime.GC()
	samples := make([]time.Duration, 0, 8<<20)
	i := 0
	hit := func() error {
		t0 := time.Now()
		_, err := w.Hit(ctx, keys[i], AllowAll, 1)
		samples = append(samples, time.Since(t0))
		if i++; i == len(keys) {
			i = 0
		}
		return err
	}
	var wg sync.WaitGroup
	var snapErr error
	done := make(chan struct{})
	wg.Add(1)
	t0 := time.Now()
	go func() {
		defer wg.Done()
		snapErr = db.Snapshot()
		r.SnapshotTime = time.Since(t0)
		close(done)
	}()
loop:
	for {
		select {
		case <-done:
			break loop
		default:
		}
		if err := hit(); err != nil {
			return r, err
		}
		if len(samples) == cap(samples) {
			<-done
			break
		}
	}
	wg.Wait()
	if snapErr != nil {
		return r, snapErr
	}
	during := slices.Clone(samples)
	m := max(len(during), 1_000_000)
	samples = samples[:0]
	runtime.GC()
	for len(samples) < m {
		if err := hit(); err != nil {
			return r, err
		}
	}
	r.During = summarize(during)
	r.Idle = summarize(samples)
	return r, nil
}
