package ratedb_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
)

func benchWindow(b *testing.B, path string, opts *ratedb.Options) *ratedb.Window {
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
	return w
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
