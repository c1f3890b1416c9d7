package ratedb_test

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/layout"
	bolt "go.etcd.io/bbolt"
)

func benchWindow(b *testing.B, path string, opts *ratedb.Options) *ratedb.Window {
	_, w := benchDB(b, path, opts)
	return w
}

// benchDB opens a DB closed by b.Cleanup and its one-hour FixedWindow.
func benchDB(b *testing.B, path string, opts *ratedb.Options) (*ratedb.DB, *ratedb.Window) {
	b.Helper()
	db, err := ratedb.Open(path, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	return db, w
}

func benchModes(b *testing.B, fn func(b *testing.B, path string)) {
	b.Run("memory", func(b *testing.B) { fn(b, "") })
	b.Run("file", func(b *testing.B) { fn(b, tempPath(b)) })
}

// BenchmarkWindow_Hit measures an allowed Hit with the real default clock.
func BenchmarkWindow_Hit(b *testing.B) {
	b.Run("hot_key", func(b *testing.B) {
		benchModes(b, func(b *testing.B, path string) {
			w := benchWindow(b, path, nil)
			b.ReportAllocs()
			for b.Loop() {
				if r, err := w.Hit(ctx, "hot", 1<<62, 1); err != nil || !r.Allowed {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("hot_key_parallel", func(b *testing.B) {
		benchModes(b, func(b *testing.B, path string) {
			w := benchWindow(b, path, nil)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r, err := w.Hit(ctx, "hot", 1<<62, 1); err != nil || !r.Allowed {
						b.Error(err)
						return
					}
				}
			})
		})
	})
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys_%d", n), func(b *testing.B) {
			benchModes(b, func(b *testing.B, path string) {
				keys := make([]string, n)
				for i := range keys {
					keys[i] = fmt.Sprintf("user:%08d", i)
				}
				w := benchWindow(b, path, &ratedb.Options{MaxHotKeys: int64(2 * n)})
				for _, k := range keys { // warm: every key present
					if _, err := w.Hit(ctx, k, 1<<62, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				i := 0
				for b.Loop() {
					if r, err := w.Hit(ctx, keys[i], 1<<62, 1); err != nil || !r.Allowed {
						b.Fatal(err)
					}
					if i++; i == n {
						i = 0
					}
				}
			})
		})
	}
}

// BenchmarkDB_Snapshot measures db.Snapshot writing n changed windows of
// 15-byte keys that are already in the file (updates, the steady state of a
// busy limiter), and the first snapshot of n new windows (inserts). Hitting
// the windows between snapshots is not timed. allocs/op are per snapshot:
// divide by n for per-window allocations. cpu-ns/window is the process's
// CPU time (user and system, every goroutine: the garbage collector's share
// included) during the snapshots, per window; file-B/window is the file's
// size after the updates divided by n, block-B/window the bytes of its
// blocks of windows, and leaf-fill-% how full bbolt's pages holding them
// are.
func BenchmarkDB_Snapshot(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("user:%010d", i*7919%n)
		}
		hitAll := func(b *testing.B, w *ratedb.Window) {
			for _, k := range keys {
				if _, err := w.Hit(ctx, k, 1<<62, 1); err != nil {
					b.Fatal(err)
				}
			}
		}
		var path string
		open := func(b *testing.B) (*ratedb.DB, *ratedb.Window) {
			path = tempPath(b)
			return benchDB(b, path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: int64(2 * n)})
		}
		// fileBytes closes db and reports the file's size per window (its
		// free pages and bbolt's growth slack included), the bytes of
		// blocks per window, and how full the blocks' leaf pages are.
		fileBytes := func(b *testing.B, db *ratedb.DB) {
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(fi.Size())/float64(n), "file-B/window")
			bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			defer bdb.Close()
			var values int
			var st bolt.BucketStats
			if err := bdb.View(func(tx *bolt.Tx) error {
				bb := tx.Bucket(layout.BucketBlocks)
				st = bb.Stats()
				return bb.ForEach(func(_, v []byte) error { values += len(v); return nil })
			}); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(values)/float64(n), "block-B/window")
			b.ReportMetric(100*float64(st.LeafInuse)/float64(st.LeafAlloc), "leaf-fill-%")
		}
		snap := func(b *testing.B, db *ratedb.DB) {
			if err := db.Snapshot(); err != nil {
				b.Fatal(err)
			}
			if got := db.Stats().LastSnapshotWindows; got != int64(n) {
				b.Fatalf("snapshot wrote %d windows, want %d", got, n)
			}
		}
		b.Run(fmt.Sprintf("update_%d", n), func(b *testing.B) {
			db, w := open(b)
			hitAll(b, w)
			snap(b, db)
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				hitAll(b, w)
				b.StartTimer()
				before := processCPU()
				snap(b, db)
				cpu += processCPU() - before
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "windows/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n*b.N), "cpu-ns/window")
			fileBytes(b, db)
		})
		b.Run(fmt.Sprintf("insert_%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				db, w := open(b)
				hitAll(b, w)
				b.StartTimer()
				snap(b, db)
				b.StopTimer()
				_ = db.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "windows/s")
		})
	}
}

// BenchmarkFlood hits a file with distinct new keys, each once, from
// GOMAXPROCS goroutines, with MaxHotKeys 1,000,000 and the default snapshot
// backlog: bench/cmd/flood's workload, without its count check. "file" runs
// it as it is; "no_file_write" discards every snapshot's writes (the windows
// are lost), which times what is left when the file costs nothing: a new
// key's hit path, the snapshots' copy and sort, and the windows leaving
// memory once written. No layout of the file can make the flood faster
// than that. The flood reaches its steady state only past MaxHotKeys keys:
//
//	go test -run '^$' -bench Flood -benchtime 8000000x
func BenchmarkFlood(b *testing.B) {
	for _, mode := range []string{"file", "no_file_write"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "no_file_write" {
				defer ratedb.DiscardSnapshotWrites()()
			}
			db, err := ratedb.Open(tempPath(b), &ratedb.Options{MaxHotKeys: 1_000_000})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			w, err := db.Window(ratedb.FixedWindow, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var buf [20]byte
				for pb.Next() {
					k := strconv.AppendInt(append(buf[:0], 'f'), next.Add(1), 10)
					r, err := w.Hit(ctx, unsafe.String(&k[0], len(k)), 1<<62, 1)
					if err != nil || !r.Allowed || r.Count != 1 {
						b.Errorf("a new key's first hit: %+v, %v", r, err)
						return
					}
				}
			})
			b.StopTimer()
			st := db.Stats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "hits/s")
			b.ReportMetric(float64(st.BacklogWaits), "backlog-waits")
			b.ReportMetric(0, "ns/op")
		})
	}
}
