package bench

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestDecisions checks that every limiter allows and denies as configured:
// the allowed quota never denies, a limit of 1 or 5 denies from the 2nd or
// 6th hit on, per key, and Present sees exactly the keys hit.
func TestDecisions(t *testing.T) {
	for _, f := range Factories {
		t.Run(f.Name, func(t *testing.T) {
			if err := checkDecisions(f, t.TempDir()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestKeys checks the generators: distinct keys, distinct arena keys, Zipf
// indexes in range and skewed.
func TestKeys(t *testing.T) {
	ks := Keys(10_000)
	if err := CheckDistinct(ks, 10_000); err != nil {
		t.Fatal(err)
	}
	a := NewArena(100_000)
	seen := make(map[string]struct{}, a.Len())
	for i := 0; i < a.Len(); i++ {
		k := a.Key(i)
		if len(k) != ArenaKeyWidth {
			t.Fatalf("arena key %q has length %d", k, len(k))
		}
		seen[k] = struct{}{}
	}
	if len(seen) != a.Len() {
		t.Fatalf("arena: %d distinct of %d", len(seen), a.Len())
	}
	z := ZipfSequence(1000, 1<<16)
	counts := make([]int, 1000)
	for _, i := range z {
		if i >= 1000 {
			t.Fatalf("zipf index %d out of range", i)
		}
		counts[i]++
	}
	// Zipf(1.1) over 1,000 ranks draws the top rank about 18% of the time;
	// a uniform draw, 0.1%. Ten times uniform is far below the one and far
	// above the other.
	if top, uniform := slices.Max(counts), len(z)/len(counts); top < 10*uniform {
		t.Fatalf("the most frequent index has %d of %d draws (uniform: %d): the sequence is not Zipf-skewed", top, len(z), uniform)
	}
}

// TestWorkloadsSmall runs every workload once at a small size.
func TestWorkloadsSmall(t *testing.T) {
	const n = 20_000
	for _, f := range Factories {
		t.Run("ManyKeys/"+f.Name, func(t *testing.T) {
			r := testing.Benchmark(func(b *testing.B) {
				NewManyKeys(b, f, n).RoundRobin(b) // fails on a denied hit or an error
			})
			if r.N == 0 {
				t.Fatal("setup or a hit failed (see log)")
			}
		})
		t.Run("Memory/"+f.Name, func(t *testing.T) {
			r, err := MeasureMemory(f, n)
			if err != nil {
				t.Fatal(err)
			}
			if r.Present != n {
				t.Fatalf("%d present, want %d", r.Present, n)
			}
		})
	}
	t.Run("BeyondMemory", func(t *testing.T) {
		r, err := BeyondMemory(context.Background(), t.TempDir(), 200_000, 20_000, 200_000, 0, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		if r.Mismatched != 0 || r.RestartMismatch != 0 || r.Verified != 200_000 {
			t.Fatalf("verified %d, %d mismatched, %d after reopen", r.Verified, r.Mismatched, r.RestartMismatch)
		}
	})
	t.Run("Snapshot", func(t *testing.T) {
		if _, err := SnapshotThroughput(t.TempDir(), n); err != nil {
			t.Fatal(err)
		}
		if _, err := SnapshotLatency(t.TempDir(), n); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFloodSmall runs the flood workload at a small size, with a hot set and
// a snapshot backlog smaller than the keys, so that windows must reach the
// file and leave memory during the hits (with the default backlog of
// 262,144 all 100,000 stay in memory and the file is never read), and
// requires every count exact.
func TestFloodSmall(t *testing.T) {
	const n = 100_000
	r, err := Flood(context.Background(), t.TempDir(), n, 10_000, 10_000, 0, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified != n || r.Mismatched != 0 {
		t.Fatalf("verified %d, %d wrong; want %d exact", r.Verified, r.Mismatched, n)
	}
	if r.Stats.WindowsInMemory >= n || r.Stats.WindowsOnDisk == 0 {
		t.Fatalf("%d windows in memory, %d on disk after the hits: the check did not read the file", r.Stats.WindowsInMemory, r.Stats.WindowsOnDisk)
	}
}

// TestSteadySmall runs the steady-state workload briefly for ratedb with a
// file, the floor and go-limiter, both patterns, and requires every key's count checked
// exact afterwards.
func TestSteadySmall(t *testing.T) {
	for _, name := range []string{"RatedbFile", "MutexMap", "GoLimiter"} {
		f, err := FactoryByName(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range SteadyPatterns {
			r, err := Steady(context.Background(), f, 20_000, p, 50*time.Millisecond, 200*time.Millisecond, p == "zipf")
			if err != nil {
				t.Fatal(err)
			}
			if r.Hits == 0 || r.NsPerHit <= 0 {
				t.Fatalf("%s/%s: %d hits, %v ns/hit", name, p, r.Hits, r.NsPerHit)
			}
			if r.Checked != 20_000 {
				t.Fatalf("%s/%s: %d keys' counts checked, want all 20,000", name, p, r.Checked)
			}
		}
	}
}
