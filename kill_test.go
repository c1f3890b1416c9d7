package ratedb_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const killChildEnv = "RATEDB_KILL_CHILD_DB"

// TestKillChild is the child half of TestKillRestart: it hits one key as fast
// as it can, printing the total allowed after each hit and, after every
// committed snapshot, the total that had been allowed when that snapshot
// began. It never returns on its own.
func TestKillChild(t *testing.T) {
	path := os.Getenv(killChildEnv)
	if path == "" {
		t.Skip("run by TestKillRestart")
	}
	fixed := func() time.Time { return epoch } // one window for the whole run
	db, err := ratedb.Open(path, &ratedb.Options{Clock: fixed, SnapshotPeriod: -1, CleanPeriod: -1})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	w, _ := db.Window(ratedb.FixedWindow, time.Hour)
	// Counts are reported as totals since the first run: the window spans
	// every run.
	allowed, err := w.Get(ctx, "k")
	if err != nil {
		fmt.Println("get:", err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		r, err := w.Hit(ctx, "k", 1<<40, 1)
		if err != nil || !r.Allowed {
			fmt.Println("hit:", err)
			os.Exit(2)
		}
		allowed++
		fmt.Println("allowed", allowed)
		if i%100 == 0 {
			began := allowed
			if err := db.Snapshot(); err != nil {
				fmt.Println("snapshot:", err)
				os.Exit(2)
			}
			fmt.Println("committed", began)
		}
	}
}

// TestKillRestart kills a child with SIGKILL in the middle of its work and
// checks the durability promise on the file it leaves: it opens, and the
// persisted count is at least what the last committed snapshot held and at
// most what was allowed.
func TestKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	path := tempPath(t)
	for cycle := 0; cycle < 5; cycle++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), killChildEnv+"="+path)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		var committed, allowed int64
		commits := 0
		target := 3 + cycle*2
		killed := false
		// Read to EOF: after the kill, the pipe still holds what the child
		// reported before it died.
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("child said %q", sc.Text())
			}
			switch f[0] {
			case "allowed":
				allowed = n
			case "committed":
				committed = n
				commits++
			}
			if commits == target && !killed {
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				killed = true
			}
		}
		_ = cmd.Wait()
		require.Positive(t, commits, "child made progress")

		db, err := ratedb.Open(path, &ratedb.Options{Clock: func() time.Time { return epoch }, SnapshotPeriod: -1, CleanPeriod: -1})
		require.NoError(t, err, "cycle %d: the file reopens after SIGKILL", cycle)
		w, _ := db.Window(ratedb.FixedWindow, time.Hour)
		n, err := w.Get(ctx, "k")
		require.NoError(t, err)
		assert.GreaterOrEqual(t, n, committed, "cycle %d: nothing committed was lost", cycle)
		assert.LessOrEqual(t, n, allowed+1, "cycle %d: nothing counted twice", cycle) // +1: a hit admitted but not yet reported when killed
		require.NoError(t, db.Close())
	}
}
