package ratedb

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sortChanges orders as compareChanges does, at every size and with hashes
// that share their top bits or are equal.
func TestSortChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		n    int
		h    func(i int) uint64
	}{
		{"small", 1000, func(int) uint64 { return rng.Uint64() }},
		{"large", 300_000, func(int) uint64 { return rng.Uint64() }},
		{"one bucket", 100_000, func(int) uint64 { return 0xabcd<<48 | rng.Uint64()>>20 }},
		{"equal hashes", 100_000, func(i int) uint64 { return uint64(i%7) << 60 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := make([]change, tc.n)
			for i := range cs {
				cs[i] = change{h: tc.h(i), key: fmt.Appendf(nil, "k%d", rng.IntN(tc.n))}
			}
			want := slices.Clone(cs)
			slices.SortStableFunc(want, func(a, b change) int { return compareChanges(&a, &b) })
			sortChanges(cs)
			for i := range cs {
				if compareChanges(&cs[i], &want[i]) != 0 {
					t.Fatalf("position %d: h %x key %q, want h %x key %q", i, cs[i].h, cs[i].key, want[i].h, want[i].key)
				}
			}
		})
	}
}
