package ratedb_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const lockChildEnv = "RATEDB_LOCK_CHILD_DB"

// TestLockHolderChild is the child half of TestLockedAcrossProcesses: it
// opens the database, says "open", and closes it when its stdin closes.
func TestLockHolderChild(t *testing.T) {
	path := os.Getenv(lockChildEnv)
	if path == "" {
		t.Skip("run by TestLockedAcrossProcesses")
	}
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1})
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(2)
	}
	fmt.Println("open")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := db.Close(); err != nil {
		os.Exit(3)
	}
	os.Exit(0)
}

// TestLockedAcrossProcesses: while another process holds the file, Open
// returns ErrLocked after OpenTimeout (in this process too, while the first
// handle is open here); once the holder exits, Open succeeds.
func TestLockedAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	path := filepath.Join(t.TempDir(), "rate.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "open\n", line)

	opts := &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1, OpenTimeout: 100 * time.Millisecond, Logger: quietLogger()}
	start := time.Now()
	_, err = ratedb.Open(path, opts)
	require.ErrorIs(t, err, ratedb.ErrLocked)
	assert.GreaterOrEqual(t, time.Since(start), opts.OpenTimeout, "Open waits OpenTimeout before giving up")

	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait())
	db, err := ratedb.Open(path, opts)
	require.NoError(t, err, "the holder has exited")
	_, err = ratedb.Open(path, opts)
	require.ErrorIs(t, err, ratedb.ErrLocked, "a second handle in the same process")
	require.NoError(t, db.Close())
}

// TestCloseRacesTraffic: Close while many goroutines hit, increment, read,
// set and reset (with windows spilling, background snapshots and janitor
// passes): no panic, no hang, every call succeeds or returns ErrClosed, and
// every increment that succeeded is in the file afterwards.
func TestCloseRacesTraffic(t *testing.T) {
	rounds := 20
	if testing.Short() || raceEnabled {
		rounds = 5
	}
	for round := 0; round < rounds; round++ {
		for _, path := range []string{"", filepath.Join(t.TempDir(), "rate.db")} {
			closeRace(t, round, path)
		}
	}
}

func closeRace(t *testing.T, round int, path string) {
	c := &mClock{}
	c.set(1_767_225_600_000)
	db, err := ratedb.Open(path, &ratedb.Options{
		Clock: c.Now, MaxHotKeys: 8, SnapshotPeriod: time.Millisecond, CleanPeriod: time.Millisecond, Logger: quietLogger(),
	})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	pk, err := db.Window(ratedb.PerKeyWindow, time.Minute)
	require.NoError(t, err)
	ly, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Hour, Limit: 1 << 40}, ratedb.Tier{Scale: time.Minute, Limit: 3})
	require.NoError(t, err)

	const goroutines, keys = 32, 64
	var (
		counted [keys]atomic.Int64 // successful increments of "count-i" in w
		calls   atomic.Int64
		bad     atomic.Value
		wg      sync.WaitGroup
	)
	check := func(err error) bool {
		if err == nil {
			return true
		}
		if !errors.Is(err, ratedb.ErrClosed) {
			bad.Store(err)
		}
		return false
	}
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
			for {
				i := rng.IntN(keys)
				k := fmt.Sprintf("count-%d", i)
				var err error
				switch rng.IntN(8) {
				case 0, 1, 2:
					var r ratedb.Result
					if r, err = w.Hit(ctx, k, 1<<40, 1); err == nil && r.Allowed {
						counted[i].Add(1)
					}
				case 3:
					if _, err = w.Inc(ctx, k, 2); err == nil {
						counted[i].Add(2)
					}
				case 4:
					_, err = w.Get(ctx, k)
				case 5:
					_, err = pk.Hit(ctx, k, 5, 1)
					if err == nil {
						err = pk.Reset(ctx, k)
					}
				case 6:
					_, err = ly.Hit(ctx, k, 1)
				default:
					_, err = pk.Set(ctx, k, 2)
				}
				calls.Add(1)
				if !check(err) {
					return
				}
			}
		}(g)
	}
	// Close once traffic is under way; calls.Load is not a sleep: it only
	// waits for the goroutines to have made progress.
	for calls.Load() < 2000 {
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("round %d: callers hung after Close", round)
	}
	select {
	case err := <-closed:
		require.NoError(t, err, "round %d: Close", round)
	case <-time.After(60 * time.Second):
		t.Fatalf("round %d: Close hung", round)
	}
	if err, _ := bad.Load().(error); err != nil {
		t.Fatalf("round %d: a call returned %v, want nil or ErrClosed", round, err)
	}
	require.ErrorIs(t, db.Close(), ratedb.ErrClosed)
	_, err = w.Hit(ctx, "x", 1, 1)
	require.ErrorIs(t, err, ratedb.ErrClosed)
	if path == "" {
		return
	}
	db, err = ratedb.Open(path, &ratedb.Options{Clock: c.Now, SnapshotPeriod: -1, CleanPeriod: -1, Logger: quietLogger()})
	require.NoError(t, err)
	defer db.Close()
	w, err = db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	for i := 0; i < keys; i++ {
		n, err := w.Get(ctx, fmt.Sprintf("count-%d", i))
		require.NoError(t, err)
		require.Equal(t, counted[i].Load(), n, "round %d key %d: every successful increment survives Close", round, i)
	}
}
