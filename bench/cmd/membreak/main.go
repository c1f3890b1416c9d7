// Command membreak measures where ratedb's memory per window goes: what Open
// allocates up front, what each window adds, and how much of that is
// ristretto's, by building ristretto alone with ratedb's configuration and a
// plain map of the kind ratedb's index uses. Bad flag values (-keys or
// -maxhot below 1) exit 2 before anything is measured; a failure exits 1.
//
//	cd bench && go run ./cmd/membreak
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/bench/internal/cmdflag"
)

// heap returns the live heap after forced collections.
func heap() int64 {
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func main() { os.Exit(run(os.Args[1:])) }

// run is the command with its arguments. It returns the exit status: 0
// after the measurements (and after -h), 2 for bad flags, checked before
// anything is allocated, and 1 when ratedb or ristretto refuses to be
// built or a hit fails.
func run(args []string) int {
	fs := flag.NewFlagSet("membreak", flag.ContinueOnError)
	n := fs.Int("keys", 1_000_000, "distinct windows (at least 1)")
	hot := fs.Int64("maxhot", 1<<20, "MaxHotKeys (ratedb's default: 1<<20; at least 1)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2 // fs printed the error and the usage
	}
	if err := cmdflag.NoArgs(fs.Args()); err != nil {
		log.Printf("membreak: %v", err)
		return 2
	}
	switch {
	case *n < 1:
		log.Print("membreak: -keys must be at least 1")
		return 2
	case *hot < 1:
		log.Print("membreak: -maxhot must be at least 1")
		return 2
	}
	keys := make([]string, *n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%010d", i) // 15 bytes
	}
	per := func(b int64) float64 { return float64(b) / float64(*n) }

	h0 := heap()
	db, err := ratedb.Open("", &ratedb.Options{MaxHotKeys: *hot})
	if err != nil {
		log.Printf("membreak: %v", err)
		return 1
	}
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	if err != nil {
		log.Printf("membreak: %v", err)
		return 1
	}
	h1 := heap()
	ctx := context.Background()
	for _, k := range keys {
		if _, err := w.Hit(ctx, k, 1<<40, 1); err != nil {
			log.Printf("membreak: hit: %v", err)
			return 1
		}
	}
	h2 := heap()
	st := db.Stats()
	fmt.Printf("ratedb (memory only, MaxHotKeys %d, %d windows, %d in memory, %d spilled):\n", *hot, *n, st.WindowsInMemory, st.Spilled)
	fmt.Printf("  allocated by Open:   %6.1f MB = %5.1f B/window\n", float64(h1-h0)/1e6, per(h1-h0))
	fmt.Printf("  added per window:    %5.1f B\n", per(h2-h1))
	fmt.Printf("  total:               %5.1f B/window\n", per(h2-h0))
	if err := db.Close(); err != nil {
		log.Printf("membreak: %v", err)
		return 1
	}

	h0 = heap()
	c, err := ristretto.NewCache(&ristretto.Config[uint64, *int]{
		NumCounters: 10 * *hot, MaxCost: *hot, BufferItems: 64, IgnoreInternalCost: true,
	})
	if err != nil {
		log.Printf("membreak: %v", err)
		return 1
	}
	h1 = heap()
	v := new(int)
	for i := 0; i < *n; i++ {
		for !c.Set(uint64(i)*0x9E3779B97F4A7C15+1, v, 1) { // retry dropped Sets
		}
	}
	c.Wait()
	h2 = heap()
	fmt.Printf("ristretto alone, ratedb's configuration, %d items:\n", *n)
	fmt.Printf("  allocated by NewCache: %6.1f MB = %5.1f B/window\n", float64(h1-h0)/1e6, per(h1-h0))
	fmt.Printf("  added per item:        %5.1f B\n", per(h2-h1))
	runtime.KeepAlive(c)

	h0 = heap()
	m := make(map[uint64]*int)
	for i := 0; i < *n; i++ {
		m[uint64(i)*0x9E3779B97F4A7C15] = v
	}
	h1 = heap()
	fmt.Printf("map[uint64]*T grown to %d entries (ratedb's index is 256 of these): %.1f B/entry\n", *n, per(h1-h0))
	runtime.KeepAlive(m)
	runtime.KeepAlive(keys)
	return 0
}
