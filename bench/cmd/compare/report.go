package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb/bench"
	"github.com/ratedb/ratedb/bench/internal/cmdline"
)

// ratedbRevision describes the ratedb source measured: the commit of the
// enclosing repository and whether its working tree had changes.
func ratedbRevision() string {
	out, err := exec.Command("git", "-C", "..", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown revision"
	}
	rev := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no").Output()
	if err == nil && len(bytes.TrimSpace(st)) > 0 {
		rev += " with uncommitted changes in the working tree"
	}
	return rev
}

// suite collects every measurement of one compare run.
type suite struct {
	o       options
	tput    map[string]map[string][]testing.BenchmarkResult // limiter -> workload -> runs
	mem     map[string][]bench.MemoryResult
	snap    map[int][]bench.SnapshotResult
	lat     []bench.SnapshotLatencyResult
	big     *bench.BeyondResult
	elapsed time.Duration

	loadStart, loadEnd string // /proc/loadavg
	header             string // machine, Go, command: fixed when measured
}

// raw is the JSON form of a suite (results/raw.json), from which -render
// redraws RESULTS.md and the charts without measuring again.
type raw struct {
	Runs, Keys         int
	Benchtime          time.Duration
	Quick              bool
	Tput               map[string]map[string][]testing.BenchmarkResult
	Mem                map[string][]bench.MemoryResult
	Snap               map[int][]bench.SnapshotResult
	Lat                []bench.SnapshotLatencyResult
	Big                *bench.BeyondResult
	Elapsed            time.Duration
	LoadStart, LoadEnd string
	Header             string
}

func (s *suite) toRaw() raw {
	return raw{Runs: s.o.runs, Keys: s.o.keys, Benchtime: s.o.benchtime, Quick: s.o.quick, Tput: s.tput, Mem: s.mem, Snap: s.snap,
		Lat: s.lat, Big: s.big, Elapsed: s.elapsed, LoadStart: s.loadStart, LoadEnd: s.loadEnd, Header: s.header}
}

func fromRaw(r raw) *suite {
	return &suite{o: options{runs: r.Runs, keys: r.Keys, benchtime: r.Benchtime, quick: r.Quick}, tput: r.Tput, mem: r.Mem, snap: r.Snap,
		lat: r.Lat, big: r.Big, elapsed: r.Elapsed, loadStart: r.LoadStart, loadEnd: r.LoadEnd, header: r.Header}
}

// makeHeader describes the machine, the toolchain and the command.
func (s *suite) makeHeader() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("- Command (from `bench/`): `%s`\n", cmdline.Join(append([]string{"go", "run", "./cmd/compare"}, s.o.args...)))
	p("- Machine: %d CPUs (nproc), %s, %s/%s\n", runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH)
	p("- Go: %s; GOMAXPROCS %d\n", runtime.Version(), runtime.GOMAXPROCS(0))
	p("- ratedb: %s\n", ratedbRevision())
	p("- Date: %s\n", time.Now().UTC().Format(time.RFC3339))
	return b.String()
}

// loadavg returns the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func minMax(xs []float64) (float64, float64) { return slices.Min(xs), slices.Max(xs) }

// ns returns the ns/op of every run of limiter's workload.
func (s *suite) ns(limiter, id string) []float64 {
	var xs []float64
	for _, r := range s.tput[limiter][id] {
		xs = append(xs, nsPerOp(r))
	}
	return xs
}

// failed returns how many runs of limiter's workload id had hits that were
// denied or returned an error (the parallel workloads count them as hits
// and report their share as failed/op rather than stop), and the largest
// share of a run's hits they were.
func (s *suite) failed(limiter, id string) (runs int, worst float64) {
	for _, r := range s.tput[limiter][id] {
		if v := r.Extra["failed/op"]; v > 0 {
			runs++
			worst = max(worst, v)
		}
	}
	return runs, worst
}

func (s *suite) bytesPerKey(limiter string) []float64 {
	var xs []float64
	for _, m := range s.mem[limiter] {
		xs = append(xs, m.BytesPerKey)
	}
	return xs
}

// fastestPeer returns the peer library (not ratedb, not the MutexMap floor)
// with the lowest median for workload id, and that median.
func (s *suite) fastestPeer(id string, floor bool) (string, float64) {
	best, bestV := "", math.Inf(1)
	for _, f := range bench.Factories {
		if !f.Peer || (!floor && f.Name == "MutexMap") {
			continue
		}
		if v := median(s.ns(f.Name, id)); v < bestV {
			best, bestV = f.Name, v
		}
	}
	return best, bestV
}

func (s *suite) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# ratedb vs Go rate limiters: measured results\n\n")
	p("Generated by `bench/cmd/compare`; every figure below is as measured, nothing edited.\n\n")
	b.WriteString(s.header)
	p("- Load average (/proc/loadavg) at start: %s; at end: %s. Anything above ~0.5 at the start means other processes shared the CPUs.\n", s.loadStart, s.loadEnd)
	p("- Suite wall time %v\n", s.elapsed.Round(time.Second))
	p("- Runs: %d (median shown, min–max in brackets); benchtime %v per throughput figure; %d distinct keys in the many-keys and memory workloads\n\n",
		s.o.runs, s.o.benchtime, s.o.keys)

	p("## Limiters\n\n| name | what is measured |\n|---|---|\n")
	for _, f := range bench.Factories {
		p("| %s | %s |\n", f.Name, f.Desc)
	}
	p("\nEvery limiter gets the same quota: %d hits per key per %v for allowed workloads (so every timed hit is allowed; token bucket and GCRA limiters get the same rate with a burst of the limit), and 1 hit per %v with the hit already taken for the denied workload. The decision of each configuration is checked before measuring (allow/deny sequences for limits 1, 5 and the large limit), and every many-keys limiter is checked to hold all %d keys after the fill.\n\n",
		bench.AllowAll, bench.DefaultWindow, bench.DefaultWindow, s.o.keys)

	p("## Summary: ns per hit (median) and bytes per key\n\n")
	p("| limiter |")
	for _, w := range workloads {
		p(" %s |", w.title)
	}
	p(" heap B/key at %d keys |\n|---|", s.o.keys)
	for range workloads {
		p("---:|")
	}
	p("---:|\n")
	for _, f := range bench.Factories {
		p("| %s |", f.Name)
		for _, w := range workloads {
			p(" %.1f |", median(s.ns(f.Name, w.id)))
		}
		p(" %.1f |\n", median(s.bytesPerKey(f.Name)))
	}
	var failures []string
	for _, f := range bench.Factories {
		for _, w := range workloads {
			if n, worst := s.failed(f.Name, w.id); n > 0 {
				failures = append(failures, fmt.Sprintf("%s in %s (%d of %d runs, up to %.4f of a run's hits)", f.Name, w.title, n, len(s.tput[f.Name][w.id]), worst))
			}
		}
	}
	if len(failures) > 0 {
		p("\nHits denied or failed during the measurement, counted in ns/op (the parallel workloads report them rather than stop): %s.\n", strings.Join(failures, "; "))
	}
	p("\nSpeed vs the fastest peer library = (fastest peer's median ns) / (limiter's median ns): above 1 means faster. The MutexMap floor is not a library; it is listed separately.\n\n")
	p("| workload | fastest peer | its ns | RatedbFile ns | RatedbFile speed vs fastest peer | RatedbMem speed vs fastest peer | MutexMap floor ns | RatedbFile speed vs floor |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range workloads {
		peer, pv := s.fastestPeer(w.id, false)
		rf, rm, mm := median(s.ns("RatedbFile", w.id)), median(s.ns("RatedbMem", w.id)), median(s.ns("MutexMap", w.id))
		p("| %s | %s | %.1f | %.1f | %.2fx | %.2fx | %.1f | %.2fx |\n", w.title, peer, pv, rf, pv/rf, pv/rm, mm, mm/rf)
	}

	for _, w := range workloads {
		p("\n### %s\n\n| limiter | ns/op median | min–max | allocs/op | B/op | speed vs fastest peer |\n|---|---:|---|---:|---:|---:|\n", w.title)
		_, pv := s.fastestPeer(w.id, false)
		for _, f := range bench.Factories {
			rs := s.tput[f.Name][w.id]
			xs := s.ns(f.Name, w.id)
			lo, hi := minMax(xs)
			last := rs[len(rs)-1]
			extra := ""
			if n, worst := s.failed(f.Name, w.id); n > 0 {
				extra = fmt.Sprintf(" (in %d of %d runs hits were denied or returned an error, counted in ns/op: up to %.4f of a run's hits)", n, len(rs), worst)
			}
			p("| %s | %.1f | %.1f–%.1f | %d | %d | %.2fx%s |\n", f.Name, median(xs), lo, hi, last.AllocsPerOp(), last.AllocedBytesPerOp(), pv/median(xs), extra)
		}
	}

	p("\n## Memory: retained heap per key\n\nOne child process per limiter: HeapAlloc after hitting %d distinct keys (each a fresh string, so a limiter that keeps keys pays for them) and 3 forced GCs, minus HeapAlloc before the limiter was built (so fixed structures sized at construction count). ratedb with a file is measured after a snapshot; its default MaxHotKeys (1,048,576) is used.\n\n| limiter | B/key median | min–max | keys present | peak RSS of the child (MiB) |\n|---|---:|---|---:|---:|\n", s.o.keys)
	for _, f := range bench.Factories {
		xs := s.bytesPerKey(f.Name)
		lo, hi := minMax(xs)
		ms := s.mem[f.Name]
		last := ms[len(ms)-1]
		p("| %s | %.1f | %.1f–%.1f | %d | %d |\n", f.Name, median(xs), lo, hi, last.Present, last.PeakRSS>>20)
	}

	p("\n## Persistence (ratedb only)\n\n### Snapshot throughput\n\n`db.Snapshot()` timed on a file with periodic snapshots off, after hitting N distinct keys (insert: new windows) and after hitting all N again (update: changed existing windows).\n\n| changed windows | insert time median | insert windows/s median (min–max) | update time median | update windows/s median (min–max) |\n|---:|---:|---|---:|---|\n")
	for _, n := range snapSizes(s.o) {
		var it, ir, ut, ur []float64
		for _, r := range s.snap[n] {
			it = append(it, r.Insert.Seconds())
			ir = append(ir, r.InsertRate)
			ut = append(ut, r.Update.Seconds())
			ur = append(ur, r.UpdateRate)
		}
		il, ih := minMax(ir)
		ul, uh := minMax(ur)
		p("| %d | %.3f s | %.0f (%.0f–%.0f) | %.3f s | %.0f (%.0f–%.0f) |\n", n, median(it), median(ir), il, ih, median(ut), median(ur), ul, uh)
	}
	p("\n### Hit latency while a snapshot runs\n\nSingle Hits, one goroutine, round-robin over %d keys that are all dirty; each sample includes two clock reads. \"During\" is while `db.Snapshot()` of those %d windows runs on another goroutine; \"idle\" is the same loop afterwards with nothing else running (at least 1,000,000 samples).\n\n| run | snapshot time | samples during | p50 during | p99 during | p99.9 during | max during | p50 idle | p99 idle | p99.9 idle | p99 ratio during/idle |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", s.o.keys, s.o.keys)
	var ratios []float64
	for i, r := range s.lat {
		ratio := float64(r.During.P99) / float64(r.Idle.P99)
		ratios = append(ratios, ratio)
		p("| %d | %v | %d | %v | %v | %v | %v | %v | %v | %v | %.2f |\n", i+1, r.SnapshotTime.Round(time.Millisecond), r.During.N, r.During.P50, r.During.P99, r.During.P999, r.During.Max.Round(time.Microsecond), r.Idle.P50, r.Idle.P99, r.Idle.P999, ratio)
	}

	if br := s.big; br != nil {
		p("\n## Beyond memory and restart (ratedb only)\n\nOne child process: a file with %d live windows (each key hit once), `MaxHotKeys` = %d, then %d timed hits on Zipf(1.1)-distributed keys over all %d windows, one goroutine. Keys live in one %d-byte arena and the Zipf sequence takes %d bytes: both are counted in the peak RSS.\n\n",
			br.Windows, br.MaxHotKeys, br.Hits, br.Windows, br.ArenaBytes, br.SeqBytes)
		p("| figure | value |\n|---|---:|\n")
		p("| fill: %d first hits | %v (%.0f hits/s) |\n", br.Windows, br.FillTime.Round(time.Millisecond), float64(br.Windows)/br.FillTime.Seconds())
		p("| Zipf hits/s | %.0f |\n", br.HitsPerSec)
		p("| peak RSS (VmHWM) | %d MiB |\n", br.PeakRSS>>20)
		p("| peak RSS minus key arena and Zipf sequence | %d MiB |\n", (br.PeakRSS-br.ArenaBytes-br.SeqBytes)>>20)
		if br.RSSAnon > 0 || br.RSSFile > 0 {
			p("| RSS right after the hits: anonymous / file-backed (bbolt mmap) | %d MiB / %d MiB |\n", br.RSSAnon>>20, br.RSSFile>>20)
		}
		p("| windows in memory / on disk after the hits | %d / %d |\n", br.Stats.WindowsInMemory, br.Stats.WindowsOnDisk)
		p("| spilled / reloaded | %d / %d |\n", br.Stats.Spilled, br.Stats.Reloaded)
		p("| counts verified exact with w.Get (all windows) | %d ok, %d wrong (%v) |\n", br.Verified, br.Mismatched, br.VerifyTime.Round(time.Millisecond))
		p("| Close (final snapshot) | %v |\n", br.CloseTime.Round(time.Millisecond))
		p("| file size | %d bytes for %d windows = %.1f B/window |\n", br.FileBytes, br.WindowsOnDisk, br.BytesPerWindow)
		p("| Open of that file | %v |\n", br.OpenTime)
		p("| first Hit after Open (existing key, read from the file) | %v |\n", br.FirstHit)
		p("| first Hit of a new key after Open | %v |\n", br.FirstHitNewKey)
		if br.Audited > 0 {
			p("| page audit after Open done (hits do not wait for it; snapshots do) | %v after Open began |\n", br.Audited.Round(time.Millisecond))
		}
		p("| counts exact after reopen (sample) | %d ok, %d wrong |\n", br.RestartVerified, br.RestartMismatch)
		p("\nThe file is in the page cache when it is reopened (same process, just closed): Open and first-Hit times are warm-cache times.\n")
	}

	p("\n## Targets\n\n| target | measured | met? |\n|---|---|---|\n")
	yes := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	peer, pv := s.fastestPeer("hot1", false)
	rf := median(s.ns("RatedbFile", "hot1"))
	var allocs int64 // the most of any run: the goal is 0 in every run
	for _, r := range s.tput["RatedbFile"]["hot1"] {
		allocs = max(allocs, r.AllocsPerOp())
	}
	p("| hot key, 1 goroutine, persistence on: ≥1.25x faster than the fastest peer, 0 allocs/op | %.1f ns vs %s %.1f ns = %.2fx; %d allocs/op (the most of any run) | %s |\n", rf, peer, pv, pv/rf, allocs, yes(pv/rf >= 1.25 && allocs == 0))
	peer, pv = s.fastestPeer("rr", false)
	rr := median(s.ns("RatedbFile", "rr"))
	p("| %d keys round-robin: no slower than the fastest peer | RatedbFile %.1f ns vs %s %.1f ns = %.2fx | %s |\n", s.o.keys, rr, peer, pv, pv/rr, yes(rr <= pv))
	mf, mm := median(s.bytesPerKey("RatedbFile")), median(s.bytesPerKey("RatedbMem"))
	p("| memory per hot window ≤ 250 B | RatedbFile %.1f B, RatedbMem %.1f B | %s |\n", mf, mm, yes(mf <= 250 && mm <= 250))
	if br := s.big; br != nil {
		p("| beyond memory (%d windows, %d hot): ≥1M hits/s | %.0f hits/s | %s |\n", br.Windows, br.MaxHotKeys, br.HitsPerSec, yes(br.HitsPerSec >= 1e6))
		p("| beyond memory: peak RSS ≤ 600 MiB | %d MiB (%d MiB without the benchmark's keys and sequence) | %s |\n", br.PeakRSS>>20, (br.PeakRSS-br.ArenaBytes-br.SeqBytes)>>20, yes(br.PeakRSS <= 600<<20))
		p("| beyond memory: counts exact | %d wrong of %d; %d wrong of %d after reopen | %s |\n", br.Mismatched, br.Verified+br.Mismatched, br.RestartMismatch, br.RestartVerified+br.RestartMismatch, yes(br.Mismatched == 0 && br.RestartMismatch == 0))
		p("| Open a %d-window file: first Hit within 100 ms | Open %v + first Hit %v | %s |\n", br.Windows, br.OpenTime, br.FirstHit, yes(br.OpenTime+br.FirstHit <= 100*time.Millisecond))
	}
	for _, n := range snapSizes(s.o) {
		var ir, ur []float64
		for _, r := range s.snap[n] {
			ir = append(ir, r.InsertRate)
			ur = append(ur, r.UpdateRate)
		}
		p("| snapshot ≥ 500k windows/s (%d changed) | insert %.0f/s, update %.0f/s | %s |\n", n, median(ir), median(ur), yes(median(ir) >= 5e5 && median(ur) >= 5e5))
	}
	if len(ratios) > 0 {
		p("| Hit p99 during a snapshot ≤ 2x idle | median ratio %.2f | %s |\n", median(ratios), yes(median(ratios) <= 2))
	}
	return b.String()
}
