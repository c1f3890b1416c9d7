// Command flood hits a ratedb file with distinct new keys as fast as it can
// (the way spoofed addresses or random API keys meet a rate limiter), then
// checks that every key counts exactly 1, and prints hits/s, the peak
// anonymous RSS (RssAnon, the heap: bbolt's file mapping is not in it) and
// the DB's Stats. SIGINT or SIGTERM stops the flood, removes the temporary
// directory and stops the profile; it then exits 130 or 143.
//
//	cd bench && go run ./cmd/flood -keys 20000000 -maxhot 1000000
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"

	"github.com/ratedb/ratedb/bench"
	"github.com/ratedb/ratedb/bench/internal/cmdflag"
	"github.com/ratedb/ratedb/bench/internal/cmdsig"
)

func main() { os.Exit(run(os.Args[1:])) }

// run is the command with its arguments; it returns the exit status (0
// after -h, 2 for bad flags, checked before anything is made, 1 for an
// error or a wrong count, 130 or 143 after SIGINT or SIGTERM, which stop
// the flood) once its deferred clean-up (the profile, the temporary
// directory) has run.
func run(args []string) (code int) {
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	keys := fs.Int("keys", 20_000_000, "distinct new keys, each hit once (at least 1)")
	hot := fs.Int64("maxhot", 1_000_000, "ratedb Options.MaxHotKeys")
	backlog := fs.Int64("backlog", 0, "ratedb Options.MaxSnapshotBacklog (0: its default, 262,144)")
	g := fs.Int("goroutines", 0, "goroutines hitting (0: GOMAXPROCS)")
	dir := fs.String("dir", "", "directory for the database file (default: a new temporary directory, removed afterwards)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	memprofile := fs.String("memprofile", "", "write a heap profile (read its alloc_space: every allocation of the run, by site) to this file at the end")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2 // fs printed the error and the usage
	}
	if err := cmdflag.NoArgs(fs.Args()); err != nil {
		log.Printf("flood: %v", err)
		return 2
	}
	switch {
	case *keys < 1:
		log.Print("flood: -keys must be at least 1")
		return 2
	case *g < 0:
		log.Print("flood: -goroutines must not be negative (0: GOMAXPROCS)")
		return 2
	}
	ctx, stop := cmdsig.Context()
	defer stop()
	defer func() { code = cmdsig.Status(ctx, "flood", code) }() // after the clean-up below
	stopProfile, err := bench.StartCPUProfile(*cpuprofile)
	if err != nil {
		log.Print(err)
		return 1
	}
	defer stopProfile()
	d := *dir
	if d == "" {
		tmp, err := os.MkdirTemp("", "ratedb-flood-")
		if err != nil {
			log.Print(err)
			return 1
		}
		defer os.RemoveAll(tmp)
		d = tmp
	}
	r, err := bench.Flood(ctx, d, *keys, *hot, *backlog, *g, log.Printf)
	if err != nil {
		log.Print(err)
		code = 1
	}
	if ctx.Err() != nil {
		return code
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
