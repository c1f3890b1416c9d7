package corrupt

import (
	"flag"
	"os"
	"testing"
	"time"
)

var (
	trials = flag.Int("corrupt.trials", 300, "corruption trials TestCorruption runs")
	batch  = flag.Int("corrupt.batch", 100, "trials per child process")
	seed   = flag.Uint64("corrupt.seed", 0, "random seed (0: from the time)")
)

// TestMain turns the test binary into a trial runner when Run starts it.
func TestMain(m *testing.M) {
	if os.Getenv(EnvChild) != "" {
		ChildMain()
		return
	}
	os.Exit(m.Run())
}

// TestCorruption runs -corrupt.trials trials, each damaging a copy of a
// ratedb file and opening it, in child processes. See the package
// documentation for what each trial checks.
func TestCorruption(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	sum, err := Run([]string{os.Args[0], "-test.run=^$"}, t.TempDir(), s, *trials, *batch)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(sum)
	if sum.Crashes+sum.Hangs+sum.Failures > 0 {
		t.Fatalf("%d crashes, %d hangs, %d failures; replay with: go test ./internal/corrupt -run TestCorruption -corrupt.seed=%d -corrupt.trials=%d -v",
			sum.Crashes, sum.Hangs, sum.Failures, s, *trials)
	}
}
