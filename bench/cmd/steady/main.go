// Command steady measures hits per second at steady state over many keys:
// for each limiter in turn (in one run, one process), it fills -keys keys,
// warms up, then hits them round-robin and Zipf(1.1) from one goroutine for
// at least -dur, so that a persistent limiter's snapshots run while the hits
// are timed. ns/hit is elapsed time: the snapshots' effect on the hits is in
// it, their CPU only under GOMAXPROCS=1 (otherwise they run on a CPU the
// peers leave idle; see bench.Steady). It prints one table.
//
// The machine's speed can drift by tens of percent within minutes (a
// virtual machine shares its memory system with its neighbours), so one run
// of each limiter compares them at different moments. -rounds N runs every
// limiter N times, rotating which goes first, and reports each limiter's
// median and the median of its per-round ratios to GoLimiter.
//
// After each measurement the counts of a limiter that reports them (ratedb,
// MutexMap, GoLimiter) are checked exact for every key (see bench.Steady). A
// measurement that fails (its limiter cannot be built, a hit errs or is
// denied, a count is wrong afterwards) is logged on stderr and marked in its row, and is no figure: its
// row's median and range and every ratio of its round leave it out. The
// others go on, and the command exits 1; bad flags exit 2 before anything
// is measured.
// SIGINT or SIGTERM stops the measurement in progress (its files removed,
// the CPU profile stopped) and exits 130 or 143 without a table.
//
//	cd bench && go run ./cmd/steady -keys 1000000 -warmup 5s -dur 20s
//	cd bench && go run ./cmd/steady -keys 200000 -warmup 3s -dur 6s -patterns roundrobin -rounds 7 -limiters RatedbFile,GoLimiter
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ratedb/ratedb/bench"
	"github.com/ratedb/ratedb/bench/internal/cmdflag"
	"github.com/ratedb/ratedb/bench/internal/cmdsig"
)

func main() { os.Exit(run(os.Args[1:])) }

// run is the command with its arguments. It returns the exit status once
// its deferred clean-up (the CPU profile) has run: 0 when every
// measurement succeeded (and after -h), 2 for bad flags, checked before
// anything is measured, and 1 when the CPU profile cannot be started or
// any measurement failed, and 130 or 143 after SIGINT or SIGTERM, which
// stop the run before the table. Each failure is logged on stderr; a
// failed measurement's row in the table says so, and a last line on stderr
// counts the failures.
func run(args []string) (code int) {
	fs := flag.NewFlagSet("steady", flag.ContinueOnError)
	keys := fs.Int("keys", 1_000_000, "distinct keys, present before the timed hits")
	warmup := fs.Duration("warmup", 5*time.Second, "untimed hits before the measurement")
	dur := fs.Duration("dur", 20*time.Second, "measured time per limiter and pattern")
	limiters := fs.String("limiters", "RatedbFile,RatedbMem,GoLimiter,MutexMap", "comma-separated limiters (see bench.Factories), each once")
	patterns := fs.String("patterns", strings.Join(bench.SteadyPatterns, ","), "comma-separated access patterns")
	rounds := fs.Int("rounds", 1, "times each limiter is measured, rotating the order each round")
	freshKeys := fs.Bool("fresh-keys", false, "hit with a second copy of each key, as requests bring their own strings (see bench.Steady)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2 // fs printed the error and the usage
	}
	names := strings.Split(*limiters, ",")
	if err := checkFlags(fs.Args(), *keys, *rounds, names, strings.Split(*patterns, ",")); err != nil {
		log.Printf("steady: %v", err)
		return 2
	}
	ctx, stop := cmdsig.Context()
	defer stop()
	defer func() { code = cmdsig.Status(ctx, "steady", code) }() // after the clean-up below
	stopProfile, err := bench.StartCPUProfile(*cpuprofile)
	if err != nil {
		log.Printf("steady: %v", err)
		return 1
	}
	defer stopProfile()
	var rows []*row
	measured, failed := 0, 0
	for _, p := range strings.Split(*patterns, ",") {
		byName := map[string]*row{}
		for _, name := range names {
			byName[name] = &row{pattern: p, limiter: name}
			rows = append(rows, byName[name])
		}
		for round := range *rounds {
			for i := range names {
				name := names[(i+round)%len(names)]
				f, err := bench.FactoryByName(name) // checkFlags found it
				if err != nil {
					log.Printf("steady: %v", err)
					return 1
				}
				log.Printf("%s/%s round %d: %d keys, warm-up %v, then %v", name, p, round+1, *keys, *warmup, *dur)
				r, err := bench.Steady(ctx, f, *keys, p, *warmup, *dur, *freshKeys)
				if ctx.Err() != nil {
					return 1
				}
				x := byName[name]
				measured++
				if err != nil {
					log.Printf("%s/%s: measurement failed: %v", name, p, err)
					x.failed = true
					failed++
					r.NsPerHit = 0 // no figure: see row.line
				}
				log.Printf("%s/%s round %d: %.0f ns/hit over %v (%d hits), %d snapshots, last %v; counts of %d keys checked exact",
					name, p, round+1, r.NsPerHit, r.Duration.Round(time.Millisecond), r.Hits, r.Snapshots, r.LastSnapshot.Round(time.Millisecond), r.Checked)
				x.ns = append(x.ns, r.NsPerHit)
				x.snapshots += r.Snapshots
				x.last = r.LastSnapshot
				x.peak = max(x.peak, r.PeakWindowsInMemory)
				runtime.GC()
			}
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("steady state: %d keys, warm-up %v, >= %v measured, %d round(s), fresh keys %v, 1 goroutine, %s, GOMAXPROCS %d, load at end %s\n",
		*keys, *warmup, *dur, *rounds, *freshKeys, runtime.Version(), runtime.GOMAXPROCS(0), strings.Fields(string(load) + " ?")[0])
	fmt.Println("| pattern | limiter | ns/hit (median, min–max) | vs GoLimiter (median of per-round ratios) | snapshots (last) | peak windows in memory |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, x := range rows {
		var gl *row
		for _, y := range rows {
			if y.pattern == x.pattern && y.limiter == "GoLimiter" {
				gl = y
			}
		}
		fmt.Print(x.line(gl))
	}
	if failed > 0 {
		log.Printf("steady: %d of %d measurements failed (see above): their figures are not valid", failed, measured)
		return 1
	}
	return 0
}

// row is one limiter's measurements of one pattern.
type row struct {
	pattern, limiter string
	ns               []float64 // one a round; 0 for a failed measurement
	snapshots        int64
	last             time.Duration
	peak             int64
	failed           bool
}

// line returns x's line of the table, its ratios to gl (GoLimiter's row of
// the same pattern; nil: none). A failed measurement is no figure: x's
// median and range are of its measured rounds ("-" when none was), and a
// ratio is taken only in a round where both x and gl were measured (a
// GoLimiter round that failed made every other row's ratio 0 that round,
// though only GoLimiter's row said it failed).
func (x *row) line(gl *row) string {
	var ns []float64
	for _, v := range x.ns {
		if v > 0 {
			ns = append(ns, v)
		}
	}
	figure := "-"
	if len(ns) > 0 {
		figure = fmt.Sprintf("%.0f (%.0f–%.0f)", median(ns), slices.Min(ns), slices.Max(ns))
	}
	if x.failed {
		figure += " (failed: see log)"
	}
	rel := "-"
	if gl != nil {
		var ratios []float64
		for i := range x.ns {
			if i < len(gl.ns) && x.ns[i] > 0 && gl.ns[i] > 0 {
				ratios = append(ratios, gl.ns[i]/x.ns[i])
			}
		}
		if len(ratios) > 0 {
			rel = fmt.Sprintf("%.2fx", median(ratios))
		}
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %d (%v) | %d |\n", x.pattern, x.limiter, figure, rel, x.snapshots, x.last.Round(time.Millisecond), x.peak)
}

// checkFlags returns an error naming the first bad value among the
// command's flags, before anything is measured: arguments after the flags,
// fewer than one key or one round, a limiter bench.FactoryByName does not
// know or one named twice (its rows would be one), a pattern not in
// bench.SteadyPatterns.
func checkFlags(extra []string, keys, rounds int, limiters, patterns []string) error {
	if err := cmdflag.NoArgs(extra); err != nil {
		return err
	}
	switch {
	case keys < 1:
		return errors.New("-keys must be at least 1")
	case rounds < 1:
		return errors.New("-rounds must be at least 1")
	}
	seen := map[string]bool{}
	for _, name := range limiters {
		if _, err := bench.FactoryByName(name); err != nil {
			return fmt.Errorf("-limiters: %w", err)
		}
		if seen[name] {
			return fmt.Errorf("-limiters names %s twice", name)
		}
		seen[name] = true
	}
	for _, p := range patterns {
		if !slices.Contains(bench.SteadyPatterns, p) {
			return fmt.Errorf("-patterns: unknown pattern %q (want one of %v)", p, bench.SteadyPatterns)
		}
	}
	return nil
}

// median returns the median of xs (not empty), averaging the middle two of
// an even count.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
