// Command quickstart shows ratedb's reason to exist: a quota that survives a
// restart. Each run makes 3 requests for one user against a limit of 5 per
// hour, counted in a file. Run it twice: the second run continues the count
// and is denied after 2 more requests; a third run is denied at once and
// says so.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart
//
// The file defaults to ratedb-quickstart.db in the system's temporary
// directory; -db chooses another, -reset starts over.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ratedb/ratedb"
)

func main() {
	path := flag.String("db", filepath.Join(os.TempDir(), "ratedb-quickstart.db"), "database file")
	reset := flag.Bool("reset", false, "forget the user's window first")
	flag.Parse()

	db, err := ratedb.Open(*path, nil)
	if err != nil {
		log.Fatal(err)
	}
	perHour, err := db.Window(ratedb.PerKeyWindow, time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if *reset {
		if err := perHour.Reset(ctx, "user:42"); err != nil {
			log.Fatal(err)
		}
	}
	before, err := perHour.Get(ctx, "user:42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("database %s: user:42 has used %d of 5 this hour\n", *path, before)
	allowed := 0
	for i := 1; i <= 3; i++ {
		r, err := perHour.Hit(ctx, "user:42", 5, 1)
		if err != nil {
			log.Fatal(err)
		}
		if r.Allowed {
			allowed++
			fmt.Printf("request %d: allowed, %d left until %s\n", i, r.Remaining, r.ResetAt.Format("15:04:05"))
		} else {
			fmt.Printf("request %d: denied, retry in %s\n", i, r.RetryAfter.Round(time.Second))
		}
	}
	if err := db.Close(); err != nil { // the final snapshot makes the counts durable
		log.Fatal(err)
	}
	if allowed == 0 {
		fmt.Println("every request was denied: the quota is used up until the window ends (use -reset to start over)")
		return
	}
	fmt.Println("run me again: the count continues (use -reset to start over)")
}
