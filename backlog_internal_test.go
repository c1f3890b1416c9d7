package ratedb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// When memory is full and the snapshot a new key's hit runs to make room
// fails, the hit returns that error and counts nothing; the backlog stays
// counted and a later snapshot writes it, after which the same hit succeeds.
func TestBacklogSnapshotFailure(t *testing.T) {
	defer func() { testBatchHook = nil }()
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 4, MaxSnapshotBacklog: 12}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 16; i++ {
		if _, err := w.Hit(ctx, fmt.Sprint("k", i), 10, 1); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("injected")
	testBatchHook = func() error { return boom }
	if _, err := w.Hit(ctx, "new", 10, 1); !errors.Is(err, boom) {
		t.Fatalf("hit on a new key with memory full and the file failing = %v, want the injected failure", err)
	}
	st := db.Stats()
	if st.SnapshotBacklog != 16 || st.WindowsInMemory != 16 || st.Allowed != 16 || st.SnapshotFailures != 1 {
		t.Fatalf("after the failed hit: %+v; want backlog 16, 16 in memory, 16 allowed, 1 failure", st)
	}
	if n, err := w.Get(ctx, "new"); err != nil || n != 0 {
		t.Fatalf("the failed hit counted: Get = %d, %v", n, err)
	}
	testBatchHook = nil
	if r, err := w.Hit(ctx, "new", 10, 1); err != nil || r.Count != 1 {
		t.Fatalf("hit after the file recovered = %+v, %v; want count 1", r, err)
	}
	for i := 0; i < 16; i++ {
		if n, err := w.Get(ctx, fmt.Sprint("k", i)); err != nil || n != 1 {
			t.Fatalf("k%d = %d, %v; want 1", i, n, err)
		}
	}
	if st := db.Stats(); st.SnapshotBacklog != 1 || st.WindowsOnDisk != 16 {
		t.Fatalf("after the retry: backlog %d, %d on disk; want 1, 16", st.SnapshotBacklog, st.WindowsOnDisk)
	}
}

// A changed window the janitor removes leaves the snapshot backlog at once:
// the file need not get its change. Before, Stats.SnapshotBacklog (the
// ratedb_snapshot_backlog gauge) went on counting it until the next
// snapshot skipped it, and so reported changes waiting for the file when
// none were, with snapshots disabled until Close. Nothing may be taken off
// twice: the snapshot that meets such a window in its queue leaves the
// backlog alone, also after a failed snapshot queued it again.
func TestBacklogForgetsWindowsTheJanitorRemoves(t *testing.T) {
	defer func() { testBatchHook = nil }()
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hit := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if _, err := w.Hit(ctx, fmt.Sprint(prefix, i), 10, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string, backlog, inMemory, onDisk int64) {
		t.Helper()
		st := db.Stats()
		if st.SnapshotBacklog != backlog || st.WindowsInMemory != inMemory || st.WindowsOnDisk != onDisk {
			t.Fatalf("%s: backlog %d, %d in memory, %d on disk; want %d, %d, %d",
				what, st.SnapshotBacklog, st.WindowsInMemory, st.WindowsOnDisk, backlog, inMemory, onDisk)
		}
	}
	clean := func(want int) {
		t.Helper()
		now = now.Add(2 * time.Second) // every window has ended
		if n, err := db.Clean(); err != nil || n != want {
			t.Fatalf("Clean = %d, %v; want %d", n, err, want)
		}
	}

	hit("k", 10)
	check("after 10 new windows", 10, 10, 0)
	clean(10)
	check("after the janitor removed them", 0, 0, 0)
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	check("after the snapshot that skipped them", 0, 0, 0)

	hit("a", 5)
	testBatchHook = func() error { return errors.New("injected") }
	if err := db.Snapshot(); err == nil {
		t.Fatal("the snapshot did not fail")
	}
	testBatchHook = nil
	check("after a failed snapshot", 5, 5, 0)
	clean(5)
	check("after the janitor removed the windows it queued again", 0, 0, 0)
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	check("after the next snapshot", 0, 0, 0)

	hit("b", 3)
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	check("after 3 windows written", 0, 3, 3)
}

// The snapshot backlog under the real clock, with snapshots and the janitor
// every millisecond and windows of a few milliseconds, so that changed
// windows are written, fail to be written (every fifth batch, in batches of
// seven windows: later batches of a snapshot fail too), are queued again,
// expire and are removed by the janitor while still changed, all while
// hits, Inc, Set, Reset, Refund and Layered hits run. Stats.SnapshotBacklog
// is never negative, and once traffic stops and a snapshot has written what
// is left, it is exactly 0: nothing was taken off twice or left behind.
func TestBacklogReturnsToZeroUnderStress(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	cases := []struct {
		name       string
		hot, spare int64 // MaxHotKeys, MaxSnapshotBacklog
		fail       bool  // fail every fifth snapshot batch
	}{
		{"failing batches", 0, 0, true},
		{"memory bound", 4, 8, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var (
				failing atomic.Bool
				batches atomic.Int64
				boom    = errors.New("injected")
			)
			failing.Store(tc.fail)
			savedBatch := snapshotBatch
			snapshotBatch = 7
			testBatchHook = func() error {
				if failing.Load() && batches.Add(1)%5 == 0 {
					return boom
				}
				return nil
			}
			db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{
				SnapshotPeriod: time.Millisecond, CleanPeriod: time.Millisecond,
				MaxHotKeys: tc.hot, MaxSnapshotBacklog: tc.spare,
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := db.Close(); err != nil {
					t.Error(err)
				}
				testBatchHook, snapshotBatch = nil, savedBatch // after Close: no snapshot runs
			}()
			var ws []*Window
			for _, a := range []struct {
				alg   Algorithm
				scale time.Duration
			}{{FixedWindow, time.Millisecond}, {FixedWindow, 3 * time.Millisecond}, {PerKeyWindow, 2 * time.Millisecond}, {StaggeredWindow, 2 * time.Millisecond}} {
				w, err := db.Window(a.alg, a.scale)
				if err != nil {
					t.Fatal(err)
				}
				ws = append(ws, w)
			}
			l, err := db.Layered(FixedWindow, Tier{Scale: time.Millisecond, Limit: 3}, Tier{Scale: 4 * time.Millisecond, Limit: 6})
			if err != nil {
				t.Fatal(err)
			}

			ctx := context.Background()
			// Traffic runs for 250 ms and until the janitor has removed
			// windows (it looks at windows in memory by the second:
			// expiryGranularity), at most 10 s.
			start := time.Now()
			minEnd, maxEnd := start.Add(250*time.Millisecond), start.Add(10*time.Second)
			more := func() bool {
				now := time.Now()
				return now.Before(minEnd) || (now.Before(maxEnd) && db.Stats().Cleaned == 0)
			}
			var (
				wg       sync.WaitGroup
				negative atomic.Int64
				errs     = make(chan error, 4)
			)
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for more() {
						key := fmt.Sprint("k", rng.IntN(40))
						w := ws[rng.IntN(len(ws))]
						var err error
						switch r := rng.IntN(20); {
						case r < 9:
							_, err = w.Hit(ctx, key, 3, 1)
						case r < 10:
							_, err = w.Hit(ctx, key, 0, 1) // denied outright on a key with no window
						case r < 12:
							_, err = w.Inc(ctx, key, 1)
						case r < 13:
							_, err = w.Set(ctx, key, 2)
						case r < 14:
							err = w.Reset(ctx, key)
						case r < 15:
							_, _, err = w.Refund(ctx, key, 1)
						case r < 19:
							_, err = l.Hit(ctx, key, 1)
						default:
							err = l.Reset(ctx, key)
						}
						if err != nil {
							errs <- err
							return
						}
						if b := db.Stats().SnapshotBacklog; b < 0 {
							negative.Store(b)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if b := negative.Load(); b != 0 {
				t.Fatalf("Stats.SnapshotBacklog went negative: %d", b)
			}
			failing.Store(false)
			if err := db.Snapshot(); err != nil {
				t.Fatal(err)
			}
			st := db.Stats()
			if st.SnapshotBacklog != 0 {
				t.Fatalf("after traffic stopped and a snapshot: backlog %d, want 0 (%d in memory, %d cleaned, %d snapshot failures)",
					st.SnapshotBacklog, st.WindowsInMemory, st.Cleaned, st.SnapshotFailures)
			}
			if tc.fail && st.SnapshotFailures == 0 {
				t.Fatal("no snapshot failed")
			}
			if st.Cleaned == 0 {
				t.Fatal("the janitor removed no window")
			}
			t.Logf("%+v", st)
		})
	}
}
