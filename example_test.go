package ratedb_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ratedb/ratedb"
)

// The quick start: 3 requests per minute per user, counted in a file so the
// quota survives a restart.
func Example() {
	dir, err := os.MkdirTemp("", "ratedb-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "limits.db")

	db, err := ratedb.Open(path, nil) // nil: default options
	if err != nil {
		log.Fatal(err)
	}
	perMinute, err := db.Window(ratedb.PerKeyWindow, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		r, err := perMinute.Hit(ctx, "user:42", 3, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("request %d: allowed=%v remaining=%d\n", i, r.Allowed, r.Remaining)
	}
	if err := db.Close(); err != nil { // Close writes a final snapshot
		log.Fatal(err)
	}

	// After a restart the window resumes where it stopped.
	db, err = ratedb.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// The old *Window belongs to the closed DB (its calls return ErrClosed):
	// get the limiter again from the new one.
	perMinute, err = db.Window(ratedb.PerKeyWindow, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	n, err := perMinute.Get(ctx, "user:42")
	if err != nil {
		log.Fatal(err)
	}
	r, err := perMinute.Hit(ctx, "user:42", 3, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("after restart: count=%d allowed=%v\n", n, r.Allowed)
	// Output:
	// request 1: allowed=true remaining=2
	// request 2: allowed=true remaining=1
	// request 3: allowed=true remaining=0
	// request 4: allowed=false remaining=0
	// after restart: count=3 allowed=false
}

// A login flow limited by several windows at once: 1 per minute, 3 per 15
// minutes, 10 per hour. A clock is injected so the example is deterministic.
func ExampleDB_Layered() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	db, err := ratedb.Open("", &ratedb.Options{Clock: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	login, err := db.Layered(ratedb.FixedWindow,
		ratedb.Tier{Scale: time.Minute, Limit: 1},
		ratedb.Tier{Scale: 15 * time.Minute, Limit: 3},
		ratedb.Tier{Scale: time.Hour, Limit: 10},
	)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		r, err := login.Hit(ctx, "alice@example.com", 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s allowed=%v tier=%v retry=%v\n", now.Format("15:04"), r.Allowed, r.Tiers[r.Tier].Scale, r.RetryAfter)
		now = now.Add(time.Minute)
	}
	// Output:
	// 12:00 allowed=true tier=1m0s retry=0s
	// 12:01 allowed=true tier=1m0s retry=0s
	// 12:02 allowed=true tier=15m0s retry=0s
	// 12:03 allowed=false tier=15m0s retry=12m0s
	// 12:04 allowed=false tier=15m0s retry=11m0s
}

// A login limiter that counts only failures: every attempt is a hit (so
// that concurrent attempts cannot all slip past the limit), and an attempt
// whose password was right gives its hit back to every tier.
func ExampleLayered_Refund() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	db, err := ratedb.Open("", &ratedb.Options{Clock: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	login, err := db.Layered(ratedb.FixedWindow,
		ratedb.Tier{Scale: time.Minute, Limit: 3},
		ratedb.Tier{Scale: time.Hour, Limit: 10},
	)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, passwordRight := range []bool{false, true, false, true, true, false} {
		r, err := login.Hit(ctx, "alice@example.com", 1)
		if err != nil {
			log.Fatal(err)
		}
		if r.Allowed && passwordRight {
			if _, err := login.Refund(ctx, "alice@example.com", 1); err != nil {
				log.Fatal(err)
			}
		}
	}
	counts, err := login.Get(ctx, "alice@example.com")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("failures counted per tier:", counts)
	// Output:
	// failures counted per tier: [3 3]
}

// Inc, Get, Set, ExpiresAt and Reset manage a key directly, for example to
// count failures reported by another system.
func ExampleWindow_Inc() {
	now := time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)
	db, err := ratedb.Open("", &ratedb.Options{Clock: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	n, _ := w.Inc(ctx, "ip:203.0.113.7", 5)
	end, _ := w.ExpiresAt(ctx, "ip:203.0.113.7")
	fmt.Println("count", n, "until", end.UTC().Format("15:04:05"))
	n, _ = w.Set(ctx, "ip:203.0.113.7", 1)
	fmt.Println("count", n)
	_ = w.Reset(ctx, "ip:203.0.113.7")
	n, _ = w.Get(ctx, "ip:203.0.113.7")
	fmt.Println("count", n)
	// Output:
	// count 5 until 12:01:00
	// count 1
	// count 0
}

// Refund gives hits back for work that did not happen, here an upload the
// storage layer then rejected: the quota is spent only on what succeeded.
func ExampleWindow_Refund() {
	now := time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)
	db, err := ratedb.Open("", &ratedb.Options{Clock: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	r, _ := w.Hit(ctx, "user:42", 10, 4) // four uploads admitted
	fmt.Println("allowed", r.Allowed, "count", r.Count)
	n, end, _ := w.Refund(ctx, "user:42", 1) // one of them failed
	fmt.Println("count", n, "until", end.UTC().Format("15:04:05"))
	n, end, _ = w.Refund(ctx, "user:7", 1) // no window: nothing to give back
	fmt.Println("count", n, "window", !end.IsZero())
	// Output:
	// allowed true count 4
	// count 3 until 12:01:00
	// count 0 window false
}

// Undo takes a hit back from the window it counted in, and only from that
// one: here a request counted just before a minute ended is undone after
// the next minute began, and the new minute keeps its count.
func ExampleWindow_Undo() {
	now := time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)
	db, err := ratedb.Open("", &ratedb.Options{Clock: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	r, _ := w.Hit(ctx, "user:42", 10, 2)
	_ = w.Undo(ctx, "user:42", r, 2) // the work it admitted did not happen
	n, _ := w.Get(ctx, "user:42")
	fmt.Println("same minute: count", n)

	now = now.Add(29 * time.Second) // 12:00:59
	late, _ := w.Hit(ctx, "user:42", 10, 1)
	now = now.Add(2 * time.Second) // 12:01:01: a new window
	_, _ = w.Hit(ctx, "user:42", 10, 3)
	_ = w.Undo(ctx, "user:42", late, 1) // its window has ended: nothing to take back
	n, _ = w.Get(ctx, "user:42")
	fmt.Println("next minute: count", n)
	// Output:
	// same minute: count 0
	// next minute: count 3
}
