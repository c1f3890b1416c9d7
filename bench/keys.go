package bench

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"unsafe"
)

// Seed seeds every generator in this package, so that every run sees the
// same keys and the same access sequence.
const Seed = 20240601

// ZipfS is the exponent of the Zipf access distributions.
const ZipfS = 1.1

// Keys returns n distinct keys of the form "u:" + 16 hex digits, drawn from a
// generator seeded with Seed. It verifies that they are distinct and panics
// otherwise. The result is cached and shared: callers must not modify it.
func Keys(n int) []string {
	keysMu.Lock()
	defer keysMu.Unlock()
	if ks, ok := keysCache[n]; ok {
		return ks
	}
	r := rand.New(rand.NewPCG(Seed, uint64(n)))
	seen := make(map[string]struct{}, n)
	ks := make([]string, 0, n)
	for len(ks) < n {
		k := "u:" + fmt.Sprintf("%016x", r.Uint64())
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		ks = append(ks, k)
	}
	if err := CheckDistinct(ks, n); err != nil {
		panic(err)
	}
	keysCache[n] = ks
	return ks
}

var (
	keysMu    sync.Mutex
	keysCache = map[int][]string{}
	zipfCache = map[[2]int][]uint32{}
)

// CheckDistinct returns an error unless keys holds exactly want distinct
// keys.
func CheckDistinct(keys []string, want int) error {
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		seen[k] = struct{}{}
	}
	if len(keys) != want || len(seen) != want {
		return fmt.Errorf("bench: key set has %d keys, %d distinct; want %d distinct", len(keys), len(seen), want)
	}
	return nil
}

// ZipfSequence returns m indexes in [0, n) drawn from a Zipf distribution
// with exponent ZipfS (rank 0 most frequent), seeded with Seed. Ranks are
// mapped to indexes through a seeded permutation, so the hottest keys are
// spread over the key set rather than being its first entries.
func ZipfSequence(n, m int) []uint32 {
	keysMu.Lock()
	defer keysMu.Unlock()
	ck := [2]int{n, m}
	if s, ok := zipfCache[ck]; ok {
		return s
	}
	r := rand.New(rand.NewPCG(Seed, uint64(n)^0x9e3779b97f4a7c15))
	z := rand.NewZipf(r, ZipfS, 1, uint64(n-1))
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	seq := make([]uint32, m)
	for i := range seq {
		seq[i] = perm[z.Uint64()]
	}
	zipfCache[ck] = seq
	return seq
}

// Arena holds n fixed-width keys in one byte slice, for key sets too large
// to keep as n separate strings: 10,000,000 strings would cost the
// benchmark more memory than the limiter under test.
type Arena struct {
	buf   []byte
	width int
	n     int
}

// ArenaKeyWidth is the width of an Arena key: "w" and 11 decimal digits.
const ArenaKeyWidth = 12

// NewArena builds n distinct keys "w%011d" of the scrambled index i, so that
// keys are distinct by construction and not in index order.
func NewArena(n int) *Arena {
	a := &Arena{buf: make([]byte, n*ArenaKeyWidth), width: ArenaKeyWidth, n: n}
	var tmp [32]byte
	for i := 0; i < n; i++ {
		// i*7919 mod a prime > n would also do; a fixed multiplier prime
		// to 10 is a bijection mod 10^11, so keys stay distinct while the
		// product does not wrap (n below 2^64/2654435761, about 6.9e9).
		v := (uint64(i)*2654435761 + 12345) % 100_000_000_000
		b := strconv.AppendUint(tmp[:0], v, 10)
		k := a.buf[i*ArenaKeyWidth : (i+1)*ArenaKeyWidth]
		k[0] = 'w'
		pad := ArenaKeyWidth - 1 - len(b)
		for j := 1; j <= pad; j++ {
			k[j] = '0'
		}
		copy(k[1+pad:], b)
	}
	return a
}

// Len returns the number of keys.
func (a *Arena) Len() int { return a.n }

// Bytes returns the arena's size in bytes.
func (a *Arena) Bytes() int { return len(a.buf) }

// Key returns key i without allocating. The arena is never written after
// NewArena returns, so the string stays valid and immutable.
func (a *Arena) Key(i int) string {
	return unsafe.String(&a.buf[i*a.width], a.width)
}
