// Command flood hits a ratedb file with distinct new keys as fast as it can
// (the way spoofed addresses or random API keys meet a rate limiter), then
// checks that every key counts exactly 1, and prints hits/s, the peak
// anonymous RSS (RssAnon, the heap: bbolt's file mapping is not in it) and
// the DB's Stats.
//
//	cd bench && go run ./cmd/flood -keys 20000000 -maxhot 1000000
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"

	"github.com/ratedb/ratedb/bench"
)

func main() { os.Exit(run()) }

// run is the command; it returns the exit status, 1 for an error or a wrong
// count, once its deferred clean-up (the profile, the temporary directory)
// has run.
func run() (code int) {
	keys := flag.Int("keys", 20_000_000, "distinct new keys, each hit once")
	hot := flag.Int64("maxhot", 1_000_000, "ratedb Options.MaxHotKeys")
	backlog := flag.Int64("backlog", 0, "ratedb Options.MaxSnapshotBacklog (0: its default, 262,144)")
	g := flag.Int("goroutines", 0, "goroutines hitting (0: GOMAXPROCS)")
	dir := flag.String("dir", "", "directory for the database file (default: a new temporary directory, removed afterwards)")
	asJSON := flag.Bool("json", false, "print the result as JSON")
	memprofile := flag.String("memprofile", "", "write a heap profile (read its alloc_space: every allocation of the run, by site) to this file at the end")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	stopProfile, err := bench.StartCPUProfile(*cpuprofile)
	if err != nil {
		log.Fatal(err)
	}
	defer stopProfile()
	d := *dir
	if d == "" {
		tmp, err := os.MkdirTemp("", "ratedb-flood-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		d = tmp
	}
	r, err := bench.Flood(d, *keys, *hot, *backlog, *g, log.Printf)
	if err != nil {
		log.Print(err)
		code = 1
	}
	if r.Mismatched != 0 {
		log.Printf("flood: %d keys' counts are wrong", r.Mismatched)
		code = 1
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			log.Print(err)
			return 1
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			log.Print(err)
			code = 1
		}
		_ = f.Close()
	}
	if *asJSON {
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Println(string(b))
		return code
	}
	fmt.Printf("flood: %d new keys, MaxHotKeys %d, MaxSnapshotBacklog %d (0: default), %d goroutines: %.0f hits/s (%v), peak anon RSS %d MiB, peak RSS %d MiB, peak windows in memory %d, slowest sampled hit %v; verified %d exact, %d wrong (%v)\n",
		r.Keys, r.MaxHotKeys, r.Backlog, r.Goroutines, r.HitsPerSec, r.HitTime, r.PeakAnonRSS>>20, r.PeakRSS>>20, r.PeakWindowsInMemory, r.Slowest, r.Verified, r.Mismatched, r.VerifyTime)
	return code
}
