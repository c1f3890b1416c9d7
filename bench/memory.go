package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// MemoryResult is the retained heap of a limiter holding n keys.
type MemoryResult struct {
	Limiter     string
	Keys        int     // distinct keys hit
	Present     int     // keys the limiter reports holding afterwards
	HeapBytes   int64   // HeapAlloc after the fill minus HeapAlloc before the limiter was built
	BytesPerKey float64 // HeapBytes / Keys
	PeakRSS     int64   // VmHWM of the process, bytes
}

// MeasureMemory builds f, hits n distinct keys once each (every key a fresh
// allocation, so a limiter that keeps keys pays for them), and returns the
// retained heap per key: HeapAlloc after the fill and a forced GC, minus
// HeapAlloc before the limiter was built (so fixed costs sized at
// construction, such as ratedb's cache counters, count too). Run it in a
// process of its own: cmd/compare and BenchmarkX_Memory start one child
// process per limiter.
func MeasureMemory(f Factory, n int) (MemoryResult, error) {
	keys := Keys(n) // allocated before the baseline, kept until after it
	dir, rm, err := tempDir()
	if err != nil {
		return MemoryResult{}, err
	}
	defer rm()
	before := heapAlloc()
	l, err := f.New(Config{Limit: AllowAll, Window: DefaultWindow, Dir: dir})
	if err != nil {
		return MemoryResult{}, err
	}
	for _, k := range keys {
		if ok, err := l.Allow(Fresh(k)); err != nil || !ok {
			return MemoryResult{}, fmt.Errorf("%s: fill: allowed=%v err=%v", f.Name, ok, err)
		}
	}
	if err := l.Settle(); err != nil {
		return MemoryResult{}, err
	}
	after := heapAlloc()
	present, err := CountPresent(l, keys)
	if err != nil {
		return MemoryResult{}, err
	}
	runtime.KeepAlive(keys)
	r := MemoryResult{
		Limiter:     f.Name,
		Keys:        n,
		Present:     present,
		HeapBytes:   int64(after) - int64(before),
		BytesPerKey: (float64(after) - float64(before)) / float64(n),
		PeakRSS:     PeakRSS(),
	}
	if err := l.Close(); err != nil {
		return r, err
	}
	if present != n {
		return r, fmt.Errorf("%s: %d of %d keys present after the fill", f.Name, present, n)
	}
	return r, nil
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// PeakRSS returns the process's peak resident set size (VmHWM in
// /proc/self/status) in bytes, or -1 if it cannot be read.
func PeakRSS() int64 { return procStatus("VmHWM:") }

// RSS returns the process's current resident set size (VmRSS) in bytes, or
// -1.
func RSS() int64 { return procStatus("VmRSS:") }

func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if rest, ok := strings.CutPrefix(line, field); ok {
			fs := strings.Fields(rest) // "123456 kB"
			if len(fs) < 1 {
				return -1
			}
			kb, err := strconv.ParseInt(fs[0], 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}
