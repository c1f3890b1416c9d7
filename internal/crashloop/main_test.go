package main

import (
	"flag"
	"os"
	"testing"
	"time"
)

var (
	cycles = flag.Int("crashloop.cycles", 50, "kill cycles TestCrashLoop runs")
	seed   = flag.Uint64("crashloop.seed", 0, "random seed (0: from the time)")
)

// TestMain turns the test binary into the child when the parent starts it.
func TestMain(m *testing.M) {
	if os.Getenv(envPath) != "" {
		ChildMain()
		return
	}
	os.Exit(m.Run())
}

// TestCrashLoop kills a busy child process -crashloop.cycles times (every
// tenth stop is graceful) and checks the durability and exactness promises
// on the file after each kill. See the package documentation.
func TestCrashLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	sum, err := Run(Config{
		Cycles: *cycles,
		Seed:   s,
		Dir:    t.TempDir(),
		Child:  []string{os.Args[0], "-test.run=^$"},
		Log:    t.Logf,
	})
	t.Log(sum)
	if err != nil {
		t.Fatalf("%v\nreplay with: go test ./internal/crashloop -run TestCrashLoop -crashloop.seed=%d -crashloop.cycles=%d", err, s, *cycles)
	}
	if sum.Allowed == 0 || sum.Commits == 0 {
		t.Fatalf("the children made no progress: %v", sum)
	}
}
