package ratedb

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/ratedb/ratedb/internal/siphash"
)

// TestRebuildMergesLayeredCopiesTierByTier drives salvage's tier-by-tier
// merge through a real rebuild (TestSalvageMergesLayeredCopiesTierByTier
// calls salvage alone): a file holds two sound copies of one Layered
// window of (1m, 1h), each in a block of its own, and a damaged branch
// key makes the first snapshot after Open rebuild it. The stale copy has
// 5 hits in a minute that has ended and 10 in the hour; the fresh one 1
// in the current minute (or no minute window: End 0) and 11 in the hour.
// The rebuilt file must hold each tier's newer counter, so the DB and a
// reopen read 11 in the hour: chosen whole (the same latest end, then the
// larger total), the stale copy gave the hour tier back a hit it had
// counted.
func TestRebuildMergesLayeredCopiesTierByTier(t *testing.T) {
	base := time.UnixMilli(1_767_225_600_000) // on the hour
	const minute, hour = int64(60_000), int64(3_600_000)
	now := base.Add(150 * time.Second) // in the third minute
	key := append(specPrefix(FixedWindow, []int64{minute, hour}, true), "alice"...)
	at := base.UnixMilli()
	for _, tc := range []struct {
		name         string
		stale, fresh []record.Counter
		want         []int64
	}{
		{"minute ended", []record.Counter{{Count: 5, End: at + 2*minute}, {Count: 10, End: at + hour}},
			[]record.Counter{{Count: 1, End: at + 3*minute}, {Count: 11, End: at + hour}}, []int64{1, 11}},
		// End 0: the fresh copy's minute tier has no window.
		{"no minute window", []record.Counter{{Count: 5, End: at + 2*minute}, {Count: 10, End: at + hour}},
			[]record.Counter{{}, {Count: 11, End: at + hour}}, []int64{0, 11}},
	} {
		for _, freshFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fresh first=%t", tc.name, freshFirst), func(t *testing.T) {
				first, second := tc.stale, tc.fresh
				if freshFirst {
					first, second = second, first
				}
				p := filepath.Join(t.TempDir(), "rate.db")
				fillFile(t, p, now, 2000)
				rewriteBlocks(t, p, func(secret siphash.Key, blocks []storedBlock) []storedBlock {
					// Two blocks of their own, keyed at the window's
					// hash and one above it, in the file's order.
					h := layout.Hash(secret, key)
					for _, b := range blocks {
						if k := layout.KeyH(b.key); k == h || k == h+1 {
							t.Fatalf("a block of the file is keyed at the window's hash")
						}
					}
					k1, k2 := layout.BlockKey(h), layout.BlockKey(h+1)
					blocks = append(blocks,
						storedBlock{key: k1[:], windows: []record.BlockWindow{{Key: bytes.Clone(key), Counters: first}}},
						storedBlock{key: k2[:], windows: []record.BlockWindow{{Key: bytes.Clone(key), Counters: second}}})
					slices.SortFunc(blocks, func(a, b storedBlock) int { return bytes.Compare(a.key, b.key) })
					return blocks
				})
				damageBranchKey(t, p) // damage to a page: the file is rebuilt
				for _, step := range []string{"rebuilt", "reopened"} {
					db, _ := openWindow(t, p, now)
					if err := db.Snapshot(); err != nil { // waits for the audit and its rebuild
						t.Fatal(err)
					}
					if aside, _ := filepath.Glob(p + ".corrupt-*"); len(aside) != 1 {
						t.Fatalf("%s: files kept aside: %v, want 1 (the file rebuilt once)", step, aside)
					}
					l, err := db.Layered(FixedWindow, Tier{Scale: time.Minute, Limit: 100}, Tier{Scale: time.Hour, Limit: 100})
					if err != nil {
						t.Fatal(err)
					}
					got, err := l.Get(context.Background(), "alice")
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, tc.want) {
						t.Fatalf("%s: counts (1m, 1h) = %v, want %v", step, got, tc.want)
					}
					if err := db.Close(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}
