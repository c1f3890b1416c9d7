package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
)

var (
	manyKeys   = flag.Int("keys", 1_000_000, "distinct keys for the ManyKeys and Memory benchmarks")
	bigWindows = flag.Int("big", 2_000_000, "live windows for BenchmarkRatedbFile_BeyondMemory (cmd/compare uses 10,000,000)")
)

func hotKey(b *testing.B, name string) {
	f := mustFactory(b, name)
	b.Run("1goroutine", func(b *testing.B) { HotKey(b, f, false) })
	b.Run("parallel", func(b *testing.B) { HotKey(b, f, true) })
}

func denied(b *testing.B, name string) { Denied(b, mustFactory(b, name)) }

func many(b *testing.B, name string) {
	f := mustFactory(b, name)
	m := NewManyKeys(b, f, *manyKeys)
	b.Run("roundrobin", m.RoundRobin)
	b.Run("zipf", func(b *testing.B) { m.ZipfHits(b, false) })
	b.Run("zipf_parallel", func(b *testing.B) { m.ZipfHits(b, true) })
}

// memory measures retained heap bytes per key in a child process (this test
// binary re-run with TestMemoryChild), so limiters never share a heap.
func memory(b *testing.B, name string) {
	var r MemoryResult
	for b.Loop() {
		if err := RunChild(context.Background(), &r, []string{"BENCH_MEM_CHILD=" + name, "BENCH_MEM_KEYS=" + strconv.Itoa(*manyKeys)},
			os.Args[0], "-test.run=^TestMemoryChild$", "-test.count=1"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(r.BytesPerKey, "B/key")
	b.ReportMetric(float64(r.Present), "keys")
}

// TestMemoryChild is the child process of the Memory benchmarks; it does
// nothing unless BENCH_MEM_CHILD names a limiter.
func TestMemoryChild(t *testing.T) {
	name := os.Getenv("BENCH_MEM_CHILD")
	if name == "" {
		t.Skip("only run as a child of a Memory benchmark")
	}
	n, err := strconv.Atoi(os.Getenv("BENCH_MEM_KEYS"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := FactoryByName(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := MeasureMemory(f, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := PrintChildResult(r); err != nil {
		t.Fatal(err)
	}
}

func mustFactory(b *testing.B, name string) Factory {
	f, err := FactoryByName(name)
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkRatedbFile_HotKey measures RatedbFile: allowed hits on one key, 1 goroutine and RunParallel.
func BenchmarkRatedbFile_HotKey(b *testing.B) { hotKey(b, "RatedbFile") }

// BenchmarkRatedbFile_Denied measures RatedbFile: denied hits on one key.
func BenchmarkRatedbFile_Denied(b *testing.B) { denied(b, "RatedbFile") }

// BenchmarkRatedbFile_ManyKeys measures RatedbFile: allowed hits over -keys keys already present, round-robin and Zipf(1.1).
func BenchmarkRatedbFile_ManyKeys(b *testing.B) { many(b, "RatedbFile") }

// BenchmarkRatedbFile_Memory measures RatedbFile: retained heap bytes per key after -keys keys, in a child process.
func BenchmarkRatedbFile_Memory(b *testing.B) { memory(b, "RatedbFile") }

// BenchmarkRatedbMem_HotKey measures RatedbMem: allowed hits on one key, 1 goroutine and RunParallel.
func BenchmarkRatedbMem_HotKey(b *testing.B) { hotKey(b, "RatedbMem") }

// BenchmarkRatedbMem_Denied measures RatedbMem: denied hits on one key.
func BenchmarkRatedbMem_Denied(b *testing.B) { denied(b, "RatedbMem") }

// BenchmarkRatedbMem_ManyKeys measures RatedbMem: allowed hits over -keys keys already present, round-robin and Zipf(1.1).
func BenchmarkRatedbMem_ManyKeys(b *testing.B) { many(b, "RatedbMem") }

// BenchmarkRatedbMem_Memory measures RatedbMem: retained heap bytes per key after -keys keys, in a child process.
func BenchmarkRatedbMem_Memory(b *testing.B) { memory(b, "RatedbMem") }

// BenchmarkMutexMap_HotKey measures MutexMap: allowed hits on one key, 1 goroutine and RunParallel.
func BenchmarkMutexMap_HotKey(b *testing.B) { hotKey(b, "MutexMap") }

// BenchmarkMutexMap_Denied measures MutexMap: denied hits on one key.
func BenchmarkMutexMap_Denied(b *testing.B) { denied(b, "MutexMap") }

// BenchmarkMutexMap_ManyKeys measures MutexMap: allowed hits over -keys keys already present, round-robin and Zipf(1.1).
func BenchmarkMutexMap_ManyKeys(b *testing.B) { many(b, "MutexMap") }

// BenchmarkMutexMap_Memory measures MutexMap: retained heap bytes per key after -keys keys, in a child process.
func BenchmarkMutexMap_Memory(b *testing.B) { memory(b, "MutexMap") }

// BenchmarkGoLimiter_HotKey measures GoLimiter: allowed hits on one key, 1 goroutine and RunParallel.
func BenchmarkGoLimiter_HotKey(b *testing.B) { hotKey(b, "GoLimiter") }

// BenchmarkGoLimiter_Denied measures GoLimiter: denied hits on one key.
func BenchmarkGoLimiter_Denied(b *testing.B) { denied(b, "GoLimiter") }

// BenchmarkGoLimiter_ManyKeys measures GoLimiter: allowed hits over -keys keys already present, round-robin and Zipf(1.1).
func BenchmarkGoLimiter_ManyKeys(b *testing.B) { many(b, "GoLimiter") }

// BenchmarkGoLimiter_Memory measures GoLimiter: retained heap bytes per key after -keys keys, in a child process.
func BenchmarkGoLimiter_Memory(b *testing.B) { memory(b, "GoLimiter") }

// BenchmarkThrottled_HotKey measures Throttled: allowed hits on one key, 1 goroutine and RunParallel.
func BenchmarkThrottled_HotKey(b *testing.B) { hotKey(b, "Throttled") }

// BenchmarkThrottled_Denied measures Throttled: denied hits on one key.
func BenchmarkThrottled_Denied(b *testing.B) { denied(b, "Throttled") }

// BenchmarkThrottled_ManyKeys measures Throttled: allowed hits over -keys keys already present, round-robin and Zipf(1.1).
func BenchmarkThrottled_ManyKeys(b *testing.B) { many(b, "Throttled") }

// BenchmarkThrottled_Memory measures Throttled: retained heap bytes per key after -keys keys, in a child process.
func BenchmarkThrottled_Memory(b *testing.B) { memory(b, "Throttled") }

// BenchmarkXTimeRate_HotKey measures XTimeRate: allowed hits on one key, 1 goroutine and RunParallel.
func BenchmarkXTimeRate_HotKey(b *testing.B) { hotKey(b, "XTimeRate") }

// BenchmarkXTimeRate_Denied measures XTimeRate: denied hits on one key.
func BenchmarkXTimeRate_Denied(b *testing.B) { denied(b, "XTimeRate") }

// BenchmarkXTimeRate_ManyKeys measures XTimeRate: allowed hits over -keys keys already present, round-robin and Zipf(1.1).
func BenchmarkXTimeRate_ManyKeys(b *testing.B) { many(b, "XTimeRate") }

// BenchmarkXTimeRate_Memory measures XTimeRate: retained heap bytes per key after -keys keys, in a child process.
func BenchmarkXTimeRate_Memory(b *testing.B) { memory(b, "XTimeRate") }

// BenchmarkHttprate_HotKey measures Httprate: allowed hits on one key, 1 goroutine and RunParallel.
func BenchmarkHttprate_HotKey(b *testing.B) { hotKey(b, "Httprate") }

// BenchmarkHttprate_Denied measures Httprate: denied hits on one key.
func BenchmarkHttprate_Denied(b *testing.B) { denied(b, "Httprate") }

// BenchmarkHttprate_ManyKeys measures Httprate: allowed hits over -keys keys already present, round-robin and Zipf(1.1).
func BenchmarkHttprate_ManyKeys(b *testing.B) { many(b, "Httprate") }

// BenchmarkHttprate_Memory measures Httprate: retained heap bytes per key after -keys keys, in a child process.
func BenchmarkHttprate_Memory(b *testing.B) { memory(b, "Httprate") }

// BenchmarkUlule_HotKey measures Ulule: allowed hits on one key, 1 goroutine and RunParallel.
func BenchmarkUlule_HotKey(b *testing.B) { hotKey(b, "Ulule") }

// BenchmarkUlule_Denied measures Ulule: denied hits on one key.
func BenchmarkUlule_Denied(b *testing.B) { denied(b, "Ulule") }

// BenchmarkUlule_ManyKeys measures Ulule: allowed hits over -keys keys already present, round-robin and Zipf(1.1).
func BenchmarkUlule_ManyKeys(b *testing.B) { many(b, "Ulule") }

// BenchmarkUlule_Memory measures Ulule: retained heap bytes per key after -keys keys, in a child process.
func BenchmarkUlule_Memory(b *testing.B) { memory(b, "Ulule") }

// BenchmarkRatedbFile_BeyondMemory holds -big live windows (default
// 2,000,000) with a hot set of a tenth of them, and times Zipf hits.
func BenchmarkRatedbFile_BeyondMemory(b *testing.B) {
	var r BeyondResult
	for b.Loop() {
		var err error
		r, err = BeyondMemory(context.Background(), b.TempDir(), *bigWindows, int64(*bigWindows/10), 5_000_000, 0, nil)
		if err != nil {
			b.Fatal(err)
		}
	}
	if r.Mismatched > 0 || r.RestartMismatch > 0 {
		b.Errorf("%d counts wrong, %d after reopen", r.Mismatched, r.RestartMismatch)
	}
	b.ReportMetric(r.HitsPerSec, "hits/s")
	b.ReportMetric(float64(r.PeakRSS>>20), "peakRSS-MiB")
	b.ReportMetric(float64(r.RSSAnon>>20), "anonRSS-MiB")
	b.ReportMetric(float64(r.RSSFile>>20), "fileRSS-MiB")
	b.ReportMetric(float64(r.OpenTime.Microseconds())/1e3, "open-ms")
	b.ReportMetric(float64(r.FirstHit.Microseconds())/1e3, "firsthit-ms")
	b.ReportMetric(float64(r.Audited.Milliseconds()), "audit-ms")
	b.ReportMetric(r.BytesPerWindow, "file-B/window")
}

// BenchmarkRatedbFile_Snapshot times db.Snapshot writing n changed windows.
func BenchmarkRatedbFile_Snapshot(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var r SnapshotResult
			for b.Loop() {
				var err error
				if r, err = SnapshotThroughput(b.TempDir(), n); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(r.InsertRate, "insert-windows/s")
			b.ReportMetric(r.UpdateRate, "update-windows/s")
		})
	}
}

// BenchmarkRatedbFile_HitDuringSnapshot compares Hit latency while a
// snapshot of 1,000,000 changed windows runs with Hit latency at rest.
func BenchmarkRatedbFile_HitDuringSnapshot(b *testing.B) {
	var r SnapshotLatencyResult
	for b.Loop() {
		var err error
		if r, err = SnapshotLatency(b.TempDir(), 1_000_000); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.Idle.P50.Nanoseconds()), "idle-p50-ns")
	b.ReportMetric(float64(r.Idle.P99.Nanoseconds()), "idle-p99-ns")
	b.ReportMetric(float64(r.During.P50.Nanoseconds()), "snap-p50-ns")
	b.ReportMetric(float64(r.During.P99.Nanoseconds()), "snap-p99-ns")
}
