package bench

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// open builds f with cfg in a fresh temporary directory and registers its
// Close and the directory's removal with b.Cleanup.
func open(b *testing.B, f Factory, cfg Config) Limiter {
	b.Helper()
	dir, rm, err := tempDir()
	if err != nil {
		b.Fatal(err)
	}
	cfg.Dir = dir
	l, err := f.New(cfg)
	if err != nil {
		rm()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := l.Close(); err != nil {
			b.Error(err)
		}
		rm()
	})
	return l
}

// allowedConfig is the quota of every "allowed" workload.
func allowedConfig() Config { return Config{Limit: AllowAll, Window: DefaultWindow} }

// deniedConfig is the quota of the "denied" workload: one hit per window.
func deniedConfig() Config { return Config{Limit: 1, Window: DefaultWindow} }

// HotKey measures allowed hits on one key from one goroutine, or from
// GOMAXPROCS goroutines with parallel.
func HotKey(b *testing.B, f Factory, parallel bool) {
	l := open(b, f, allowedConfig())
	const key = "u:hot-key-000001"
	if ok, err := l.Allow(key); err != nil || !ok {
		b.Fatalf("%s: setup hit: allowed=%v err=%v", f.Name, ok, err)
	}
	if err := l.Settle(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		for b.Loop() {
			if ok, err := l.Allow(key); err != nil || !ok {
				b.Fatalf("%s: hot hit: allowed=%v err=%v", f.Name, ok, err)
			}
		}
		return
	}
	var bad atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if ok, err := l.Allow(key); err != nil || !ok {
				bad.Add(1)
			}
		}
	})
	if n := bad.Load(); n > 0 {
		// throttled's CAS loop gives up under contention: report it, since
		// failing would hide the figure.
		b.ReportMetric(float64(n)/float64(b.N), "failed/op")
	}
}

// Denied measures denied hits on one key from one goroutine: the key's one
// allowed hit is taken during setup.
func Denied(b *testing.B, f Factory) {
	l := open(b, f, deniedConfig())
	const key = "u:denied-key-001"
	if ok, err := l.Allow(key); err != nil || !ok {
		b.Fatalf("%s: first hit: allowed=%v err=%v", f.Name, ok, err)
	}
	if ok, err := l.Allow(key); err != nil || ok {
		b.Fatalf("%s: second hit: allowed=%v err=%v, want denied", f.Name, ok, err)
	}
	if err := l.Settle(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if ok, err := l.Allow(key); err != nil || ok {
			b.Fatalf("%s: denied hit: allowed=%v err=%v", f.Name, ok, err)
		}
	}
}

// ManyKeys is a limiter holding n distinct keys, each hit once.
type ManyKeys struct {
	Name string
	L    Limiter
	Keys []string
	Zipf []uint32 // indexes into Keys; length a power of two
}

// ZipfLen is the length of the pre-generated Zipf access sequence, replayed
// cyclically.
const ZipfLen = 1 << 22

// NewManyKeys builds f and hits each of n distinct keys once, then checks
// that the limiter holds all n. The limiter is closed by b.Cleanup.
func NewManyKeys(b *testing.B, f Factory, n int) *ManyKeys {
	b.Helper()
	m, closeFn, err := BuildManyKeys(f, n)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := closeFn(); err != nil {
			b.Error(err)
		}
	})
	return m
}

// BuildManyKeys is NewManyKeys without a *testing.B: the caller must call
// the returned function to close the limiter and remove its files.
func BuildManyKeys(f Factory, n int) (*ManyKeys, func() error, error) {
	keys := Keys(n)
	dir, rm, err := tempDir()
	if err != nil {
		return nil, nil, err
	}
	cfg := allowedConfig()
	cfg.Dir = dir
	l, err := f.New(cfg)
	if err != nil {
		rm()
		return nil, nil, err
	}
	closeFn := func() error {
		err := l.Close()
		rm()
		return err
	}
	fail := func(err error) (*ManyKeys, func() error, error) {
		_ = closeFn()
		return nil, nil, err
	}
	for _, k := range keys {
		if ok, err := l.Allow(k); err != nil || !ok {
			return fail(fmt.Errorf("%s: fill: allowed=%v err=%v", f.Name, ok, err))
		}
	}
	if err := l.Settle(); err != nil {
		return fail(err)
	}
	if got, err := CountPresent(l, keys); err != nil || got != n {
		return fail(fmt.Errorf("%s: %d of %d keys present after the fill (err %v)", f.Name, got, n, err))
	}
	return &ManyKeys{Name: f.Name, L: l, Keys: keys, Zipf: ZipfSequence(n, ZipfLen)}, closeFn, nil
}

// CountPresent returns how many of keys l holds state for.
func CountPresent(l Limiter, keys []string) (int, error) {
	n := 0
	for _, k := range keys {
		ok, err := l.Present(k)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// RoundRobin measures allowed hits cycling through every key in order.
func (m *ManyKeys) RoundRobin(b *testing.B) {
	keys, l := m.Keys, m.L
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if ok, err := l.Allow(keys[i]); err != nil || !ok {
			b.Fatalf("%s: allowed=%v err=%v", m.Name, ok, err)
		}
		if i++; i == len(keys) {
			i = 0
		}
	}
	b.ReportMetric(float64(len(keys)), "keys")
}

// ZipfHits measures allowed hits on keys drawn from a Zipf(1.1)
// distribution, from one goroutine or, with parallel, from GOMAXPROCS
// goroutines each replaying the sequence from its own offset.
func (m *ManyKeys) ZipfHits(b *testing.B, parallel bool) {
	keys, l, seq := m.Keys, m.L, m.Zipf
	mask := len(seq) - 1
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		i := 0
		for b.Loop() {
			if ok, err := l.Allow(keys[seq[i&mask]]); err != nil || !ok {
				b.Fatalf("%s: allowed=%v err=%v", m.Name, ok, err)
			}
			i++
		}
		b.ReportMetric(float64(len(keys)), "keys")
		return
	}
	var g atomic.Int64
	var bad atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := int(g.Add(1)) * 1_000_003
		for pb.Next() {
			if ok, err := l.Allow(keys[seq[i&mask]]); err != nil || !ok {
				bad.Add(1)
			}
			i++
		}
	})
	if n := bad.Load(); n > 0 {
		b.ReportMetric(float64(n)/float64(b.N), "failed/op")
	}
	b.ReportMetric(float64(len(keys)), "keys")
}

// Fresh returns a copy of s in its own allocation, so that a limiter that
// keeps the key pays for it while a caller's copy dies.
func Fresh(s string) string { return strings.Clone(s) }

// checkDecisions hits a fresh limiter of f built for the allowed and denied
// quotas and reports any decision that is not as configured. Used by the
// smoke tests.
func checkDecisions(f Factory, dir string) error {
	for _, c := range []struct {
		name    string
		cfg     Config
		allowed int // hits that must be allowed before denials start; -1: all allowed
	}{
		{"allowed", allowedConfig(), -1},
		{"denied", deniedConfig(), 1},
		{"limit 5", Config{Limit: 5, Window: DefaultWindow}, 5},
	} {
		cfg := c.cfg
		cfg.Dir = dir
		l, err := f.New(cfg)
		if err != nil {
			return err
		}
		for _, key := range []string{"k1", "k2"} {
			for i := 0; i < 50; i++ {
				ok, err := l.Allow(key)
				if err != nil {
					_ = l.Close()
					return fmt.Errorf("%s/%s hit %d: %w", f.Name, c.name, i, err)
				}
				want := c.allowed < 0 || i < c.allowed
				if ok != want {
					_ = l.Close()
					return fmt.Errorf("%s/%s key %s hit %d: allowed=%v, want %v", f.Name, c.name, key, i, ok, want)
				}
			}
			if p, err := l.Present(key); err != nil || !p {
				_ = l.Close()
				return fmt.Errorf("%s/%s: key %s not present after hits (err %v)", f.Name, c.name, key, err)
			}
		}
		if p, err := l.Present("never-hit"); err != nil || p {
			_ = l.Close()
			return fmt.Errorf("%s/%s: a key never hit is present (err %v)", f.Name, c.name, err)
		}
		if err := l.Close(); err != nil {
			return err
		}
	}
	return nil
}

// CheckDecisions is checkDecisions for external callers (cmd/compare -quick
// runs it before measuring).
func CheckDecisions(f Factory) error {
	dir, rm, err := tempDir()
	if err != nil {
		return err
	}
	defer rm()
	return checkDecisions(f, dir)
}
