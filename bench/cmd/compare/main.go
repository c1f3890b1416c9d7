// Command compare runs the ratedb benchmark suite against the peer limiters
// on this machine and writes results/RESULTS.md, results/chart.svg and
// results/chart.png.
//
// Run it from the bench directory:
//
//	go run ./cmd/compare            # full suite, 5 runs
//	go run ./cmd/compare -quick     # smoke: small sizes, one short run
//	go run ./cmd/compare -runs 10 -out /tmp/results
//
// Each figure is the median of -runs runs, with the min–max range. Memory is
// measured in one child process per limiter; the 10,000,000-window workload
// runs in a child process of its own so that its peak RSS is its own.
//
// Bad flag values exit 2 before anything is measured; a failed measurement,
// child process or write of the results exits 1, after the temporary
// directories are removed. SIGINT or SIGTERM stops the run the same way
// (a child process gets SIGTERM and runs its own clean-up; a measurement
// in progress in this process ends first), and it then exits 130 or 143.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb/bench"
	"github.com/ratedb/ratedb/bench/internal/cmdflag"
	"github.com/ratedb/ratedb/bench/internal/cmdsig"
)

type options struct {
	quick     bool
	runs      int
	out       string
	benchtime time.Duration
	keys      int
	big       int
	bigHot    int64
	bigHits   int
	noBig     bool
	args      []string // the command's arguments, shown in the report
}

func main() { os.Exit(command(os.Args[1:])) }

// command is the command with its arguments. It returns the exit status
// once its deferred clean-up (a child's temporary directory) has run: 0
// after a full run, a render or a child's result (and after -h), 2 for bad
// flags, checked before anything is measured, 1 when a measurement, a
// child or writing the results fails, and 130 or 143 after SIGINT or
// SIGTERM, which stop the run.
func command(args []string) (code int) {
	o := options{args: args}
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.BoolVar(&o.quick, "quick", false, "fast smoke run: 100,000 keys, 1,000,000 big windows, one run of 100ms benchmarks")
	fs.IntVar(&o.runs, "runs", 5, "repetitions of each measurement (median reported; at least 1)")
	fs.StringVar(&o.out, "out", "results", "directory for RESULTS.md and chart.svg")
	fs.DurationVar(&o.benchtime, "benchtime", time.Second, "target time of each throughput benchmark")
	fs.IntVar(&o.keys, "keys", 1_000_000, "distinct keys of the many-keys and memory workloads (at least 1)")
	fs.IntVar(&o.big, "big", 10_000_000, "live windows of the beyond-memory workload (at least 1)")
	fs.Int64Var(&o.bigHot, "bighot", 1_000_000, "MaxHotKeys of the beyond-memory workload")
	fs.IntVar(&o.bigHits, "bighits", 20_000_000, "timed Zipf hits of the beyond-memory workload (at least 1)")
	fs.BoolVar(&o.noBig, "nobig", false, "skip the beyond-memory and restart workload")
	childMem := fs.String("child-mem", "", "internal: measure memory of this limiter and print the result")
	childBig := fs.Bool("child-big", false, "internal: run the beyond-memory workload and print the result")
	render := fs.String("render", "", "redraw RESULTS.md and the charts in -out from this raw.json, without measuring")
	testing.Init() // registers test.benchtime, which testing.Benchmark reads
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2 // fs printed the error and the usage
	}
	log.SetFlags(log.Ltime)
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if o.quick {
		if !explicit["runs"] {
			o.runs = 1
		}
		if !explicit["benchtime"] {
			o.benchtime = 100 * time.Millisecond
		}
		if !explicit["keys"] {
			o.keys = 100_000
		}
		if !explicit["big"] {
			o.big = 1_000_000
		}
		if !explicit["bighot"] {
			o.bigHot = 100_000
		}
		if !explicit["bighits"] {
			o.bigHits = 2_000_000
		}
	}
	if err := checkFlags(fs.Args(), o); err != nil {
		log.Printf("compare: %v", err)
		return 2
	}
	if err := flag.Set("test.benchtime", o.benchtime.String()); err != nil {
		log.Printf("compare: %v", err)
		return 2
	}

	ctx, stop := cmdsig.Context()
	defer stop()
	defer func() { code = cmdsig.Status(ctx, "compare", code) }() // after the clean-up
	switch {
	case *render != "":
		b, err := os.ReadFile(*render)
		if err != nil {
			log.Printf("compare: %v", err)
			return 1
		}
		var r raw
		if err := json.Unmarshal(b, &r); err != nil {
			log.Printf("compare: %s: %v", *render, err)
			return 1
		}
		s := fromRaw(r)
		s.o.out = o.out
		if err := s.write(); err != nil {
			log.Printf("compare: %v", err)
			return 1
		}
		return 0
	case *childMem != "":
		f, err := bench.FactoryByName(*childMem)
		if err != nil {
			log.Printf("compare: %v", err)
			return 2
		}
		r, err := bench.MeasureMemory(f, o.keys)
		if err != nil {
			log.Printf("compare: %v", err)
			return 1
		}
		if err := bench.PrintChildResult(r); err != nil {
			log.Printf("compare: %v", err)
			return 1
		}
		return 0
	case *childBig:
		dir, err := os.MkdirTemp("", "ratedb-big-")
		if err != nil {
			log.Printf("compare: %v", err)
			return 1
		}
		defer os.RemoveAll(dir)
		r, err := bench.BeyondMemory(ctx, dir, o.big, o.bigHot, o.bigHits, 0, log.Printf)
		if err != nil {
			log.Printf("compare: %v", err)
			return 1
		}
		if err := bench.PrintChildResult(r); err != nil {
			log.Printf("compare: %v", err)
			return 1
		}
		return 0
	}

	if err := run(ctx, o); err != nil {
		log.Printf("compare: %v", err)
		return 1
	}
	return 0
}

// checkFlags returns an error naming the first bad value among the
// command's flags (after -quick's defaults), before anything is measured:
// arguments after the flags, fewer than one run, key, big window or big
// hit. (-runs 0 failed only when the report was written, after the
// beyond-memory workload; -bighits 0 made its hits/s NaN, which the child
// could not print.)
func checkFlags(extra []string, o options) error {
	if err := cmdflag.NoArgs(extra); err != nil {
		return err
	}
	switch {
	case o.runs < 1:
		return errors.New("-runs must be at least 1")
	case o.keys < 1:
		return errors.New("-keys must be at least 1")
	case o.big < 1:
		return errors.New("-big must be at least 1")
	case o.bigHits < 1:
		return errors.New("-bighits must be at least 1")
	}
	return nil
}

// run measures the suite and writes the results; once ctx ends, it stops
// at the next measurement (a child process gets SIGTERM) and returns ctx's
// error.
func run(ctx context.Context, o options) error {
	started := time.Now()
	load := loadavg()
	s := &suite{loadStart: load, o: o, tput: map[string]map[string][]testing.BenchmarkResult{}, mem: map[string][]bench.MemoryResult{}, snap: map[int][]bench.SnapshotResult{}}
	for _, f := range bench.Factories {
		if err := bench.CheckDecisions(f); err != nil {
			return fmt.Errorf("decision check: %w", err)
		}
	}
	log.Printf("decision checks passed for %d limiters", len(bench.Factories))
	if err := bench.CheckDistinct(bench.Keys(o.keys), o.keys); err != nil {
		return err
	}
	log.Printf("%d distinct keys checked", o.keys)

	self, err := os.Executable()
	if err != nil {
		return err
	}
	for r := 0; r < o.runs; r++ {
		log.Printf("run %d of %d (load average %s)", r+1, o.runs, loadavg())
		for _, f := range bench.Factories {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.throughput(f); err != nil {
				return err
			}
			var m bench.MemoryResult
			if err := bench.RunChild(ctx, &m, nil, self, "-child-mem", f.Name, "-keys", fmt.Sprint(o.keys)); err != nil {
				return err
			}
			s.mem[f.Name] = append(s.mem[f.Name], m)
			log.Printf("  %-10s memory %.1f B/key (%d keys present)", f.Name, m.BytesPerKey, m.Present)
		}
		for _, n := range snapSizes(o) {
			if err := ctx.Err(); err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "ratedb-snap-")
			if err != nil {
				return err
			}
			sr, err := bench.SnapshotThroughput(dir, n)
			os.RemoveAll(dir)
			if err != nil {
				return err
			}
			s.snap[n] = append(s.snap[n], sr)
			log.Printf("  snapshot %d windows: insert %v (%.0f/s), update %v (%.0f/s)", n, sr.Insert, sr.InsertRate, sr.Update, sr.UpdateRate)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "ratedb-lat-")
		if err != nil {
			return err
		}
		lr, err := bench.SnapshotLatency(dir, o.keys)
		os.RemoveAll(dir)
		if err != nil {
			return err
		}
		s.lat = append(s.lat, lr)
		log.Printf("  hit latency: idle p50 %v p99 %v; during a %v snapshot p50 %v p99 %v", lr.Idle.P50, lr.Idle.P99, lr.SnapshotTime, lr.During.P50, lr.During.P99)
	}
	if !o.noBig {
		log.Printf("beyond memory: %d windows, MaxHotKeys %d (child process)", o.big, o.bigHot)
		var br bench.BeyondResult
		args := []string{"-child-big", "-big", fmt.Sprint(o.big), "-bighot", fmt.Sprint(o.bigHot), "-bighits", fmt.Sprint(o.bigHits)}
		if err := bench.RunChild(ctx, &br, nil, self, args...); err != nil {
			return err
		}
		s.big = &br
	}
	s.elapsed = time.Since(started)
	s.loadEnd = loadavg()
	s.header = s.makeHeader()
	return s.write()
}

// write saves raw.json, RESULTS.md and the charts into the output directory.
func (s *suite) write() error {
	o := s.o
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(s.toRaw(), "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "raw.json"), js, 0o644); err != nil {
		return err
	}
	md := s.markdown()
	if err := os.WriteFile(filepath.Join(o.out, "RESULTS.md"), []byte(md), 0o644); err != nil {
		return err
	}
	for _, name := range []string{"chart.svg", "chart.png"} {
		if err := s.chart(filepath.Join(o.out, name)); err != nil {
			return err
		}
	}
	fmt.Print(md)
	log.Printf("wrote RESULTS.md, chart.svg and chart.png in %s; suite took %v", o.out, s.elapsed.Round(time.Second))
	return nil
}

func snapSizes(o options) []int {
	if o.quick {
		return []int{o.keys / 10, o.keys}
	}
	return []int{100_000, 1_000_000}
}

// workloads are the throughput workloads, in table order.
var workloads = []struct{ id, title string }{
	{"hot1", "Hot key, 1 goroutine"},
	{"hotpar", "Hot key, RunParallel"},
	{"denied", "Denied, hot key, 1 goroutine"},
	{"rr", "Many keys, round-robin"},
	{"zipf", "Many keys, Zipf(1.1)"},
	{"zipfpar", "Many keys, Zipf(1.1), RunParallel"},
}

func (s *suite) throughput(f bench.Factory) error {
	if s.tput[f.Name] == nil {
		s.tput[f.Name] = map[string][]testing.BenchmarkResult{}
	}
	add := func(id string, r testing.BenchmarkResult) error {
		if r.N == 0 {
			return fmt.Errorf("%s %s: benchmark failed (see output)", f.Name, id)
		}
		s.tput[f.Name][id] = append(s.tput[f.Name][id], r)
		return nil
	}
	if err := add("hot1", testing.Benchmark(func(b *testing.B) { bench.HotKey(b, f, false) })); err != nil {
		return err
	}
	if err := add("hotpar", testing.Benchmark(func(b *testing.B) { bench.HotKey(b, f, true) })); err != nil {
		return err
	}
	if err := add("denied", testing.Benchmark(func(b *testing.B) { bench.Denied(b, f) })); err != nil {
		return err
	}
	m, closeFn, err := bench.BuildManyKeys(f, s.o.keys)
	if err != nil {
		return err
	}
	closeOnce := sync.OnceValue(closeFn)
	defer closeOnce()
	if err := add("rr", testing.Benchmark(m.RoundRobin)); err != nil {
		return err
	}
	if err := add("zipf", testing.Benchmark(func(b *testing.B) { m.ZipfHits(b, false) })); err != nil {
		return err
	}
	if err := add("zipfpar", testing.Benchmark(func(b *testing.B) { m.ZipfHits(b, true) })); err != nil {
		return err
	}
	var parts []string
	for _, w := range workloads {
		rs := s.tput[f.Name][w.id]
		parts = append(parts, fmt.Sprintf("%s %.0f", w.id, nsPerOp(rs[len(rs)-1])))
	}
	log.Printf("  %-10s ns/op: %s", f.Name, strings.Join(parts, ", "))
	return closeOnce()
}

func nsPerOp(r testing.BenchmarkResult) float64 {
	return float64(r.T.Nanoseconds()) / float64(r.N)
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
