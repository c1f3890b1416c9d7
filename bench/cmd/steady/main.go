// Command steady measures hits per second at steady state over many keys:
// for each limiter in turn (in one run, one process), it fills -keys keys,
// warms up, then hits them round-robin and Zipf(1.1) from one goroutine for
// at least -dur, so that a persistent limiter's snapshots are charged to
// the hits. It prints one table.
//
//	cd bench && go run ./cmd/steady -keys 1000000 -warmup 5s -dur 20s
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/ratedb/ratedb/bench"
)

func main() {
	keys := flag.Int("keys", 1_000_000, "distinct keys, present before the timed hits")
	warmup := flag.Duration("warmup", 5*time.Second, "untimed hits before the measurement")
	dur := flag.Duration("dur", 20*time.Second, "measured time per limiter and pattern")
	limiters := flag.String("limiters", "RatedbFile,RatedbMem,GoLimiter,MutexMap", "comma-separated limiters (see bench.Factories)")
	patterns := flag.String("patterns", strings.Join(bench.SteadyPatterns, ","), "comma-separated access patterns")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	stopProfile, err := bench.StartCPUProfile(*cpuprofile)
	if err != nil {
		log.Fatal(err)
	}
	defer stopProfile()
	type row struct {
		r   bench.SteadyResult
		err error
	}
	var rows []row
	for _, p := range strings.Split(*patterns, ",") {
		for _, name := range strings.Split(*limiters, ",") {
			f, err := bench.FactoryByName(name)
			if err != nil {
				log.Fatal(err)
			}
			r, err := bench.Steady(f, *keys, p, *warmup, *dur)
			if err != nil {
				log.Printf("%s/%s: %v", name, p, err)
			}
			log.Printf("%s/%s: %.0f ns/hit over %v (%d hits), %d snapshots, last %v",
				name, p, r.NsPerHit, r.Duration.Round(time.Millisecond), r.Hits, r.Snapshots, r.LastSnapshot.Round(time.Millisecond))
			rows = append(rows, row{r, err})
			runtime.GC()
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("steady state: %d keys, warm-up %v, >= %v measured, 1 goroutine, %s, GOMAXPROCS %d, load at end %s\n",
		*keys, *warmup, *dur, runtime.Version(), runtime.GOMAXPROCS(0), strings.Fields(string(load) + " ?")[0])
	fmt.Println("| pattern | limiter | ns/hit | vs GoLimiter | snapshots (last) | peak windows in memory |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, x := range rows {
		var gl float64
		for _, y := range rows {
			if y.r.Pattern == x.r.Pattern && y.r.Limiter == "GoLimiter" {
				gl = y.r.NsPerHit
			}
		}
		rel := "-"
		if gl > 0 && x.r.NsPerHit > 0 {
			rel = fmt.Sprintf("%.2fx", gl/x.r.NsPerHit)
		}
		note := ""
		if x.err != nil {
			note = " (failed: see log)"
		}
		fmt.Printf("| %s | %s | %.0f%s | %s | %d (%v) | %d |\n", x.r.Pattern, x.r.Limiter, x.r.NsPerHit, note, rel,
			x.r.Snapshots, x.r.LastSnapshot.Round(time.Millisecond), x.r.PeakWindowsInMemory)
	}
}
