package ratedb

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
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

// TestSalvageKeepsTheCopyThatAllowsLess: damage can leave two copies of
// one window in a damaged file (a stale one reached through a damaged
// branch), and rebuild keeps the one that allows less: the later window
// end, then, for the same end, the larger count, whatever order the walk
// found them in. (Mutants: salvage comparing the ends, or the totals, the
// other way round kept the stale copy, and no test had two copies.)
func TestSalvageKeepsTheCopyThatAllowsLess(t *testing.T) {
	var secret siphash.Key
	for _, tc := range []struct {
		name         string
		first, other counter
		want         counter
	}{
		{"later end, smaller count", counter{Count: 2, End: 200}, counter{Count: 9, End: 100}, counter{Count: 2, End: 200}},
		{"same end, larger count", counter{Count: 9, End: 100}, counter{Count: 2, End: 100}, counter{Count: 9, End: 100}},
	} {
		for _, swap := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/swapped=%t", tc.name, swap), func(t *testing.T) {
				a, b := tc.first, tc.other
				if swap {
					a, b = b, a
				}
				var set changeSet
				set.add(secret, []byte("k-before"), "", []counter{{Count: 1, End: 50}})
				set.add(secret, []byte("k-window"), "", []counter{a})
				set.add(secret, []byte("k-window"), "", []counter{b})
				set.add(secret, []byte("k-after"), "", []counter{{Count: 1, End: 50}})
				salvage(&set)
				if len(set.changes) != 3 {
					t.Fatalf("%d windows kept, want 3", len(set.changes))
				}
				for i := range set.changes {
					c := &set.changes[i]
					if string(set.key(c)) == "k-window" {
						if got := set.counters(c); len(got) != 1 || got[0] != tc.want {
							t.Fatalf("kept %v, want %v", got, tc.want)
						}
					}
				}
			})
		}
	}
}

// TestSalvageMergesLayeredCopiesTierByTier: of two copies of a Layered
// window, rebuild keeps each tier's newer counter (the later end, then the
// larger count), so the window it keeps allows less than either copy in
// every tier. Chosen whole, by the latest end and then the larger total,
// the stale copy won whenever its shorter tier held more hits in a window
// that has ended since (the fresh copy counts one more in the hour and
// one in a new minute): the rebuilt file then gave the hour tier back a
// hit it had counted.
func TestSalvageMergesLayeredCopiesTierByTier(t *testing.T) {
	var secret siphash.Key
	const minute, hour = int64(60_000), int64(3_600_000)
	key := append(specPrefix(FixedWindow, []int64{minute, hour}, true), "alice"...)
	stale := []counter{{Count: 5, End: 2 * minute}, {Count: 10, End: hour}}
	fresh := []counter{{Count: 1, End: 3 * minute}, {Count: 11, End: hour}}
	want := []counter{{Count: 1, End: 3 * minute}, {Count: 11, End: hour}}
	for _, swap := range []bool{false, true} {
		t.Run(fmt.Sprintf("swapped=%t", swap), func(t *testing.T) {
			a, b := stale, fresh
			if swap {
				a, b = b, a
			}
			var set changeSet
			set.add(secret, key, "", a)
			set.add(secret, []byte("k-other"), "", []counter{{Count: 1, End: 50}})
			set.add(secret, key, "", b)
			salvage(&set)
			if len(set.changes) != 2 {
				t.Fatalf("%d windows kept, want 2", len(set.changes))
			}
			for i := range set.changes {
				c := &set.changes[i]
				if string(set.key(c)) == string(key) {
					if got := set.counters(c); !slices.Equal(got, want) {
						t.Fatalf("kept %v, want %v", got, want)
					}
				}
			}
		})
	}
}

// TestRebuildCountsWindowsAcrossBatches: a rebuild writes its windows
// in transactions of snapshotBatch; the count it stores in the file is the
// total of every batch, so a restart reads the file's true window count.
// (Mutant: putCount(tx, w.delta) stored only the last batch's windows, and
// no rebuild test wrote more than one batch.)
func TestRebuildCountsWindowsAcrossBatches(t *testing.T) {
	defer func(n int) { snapshotBatch = n }(snapshotBatch)
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	const n = 2000
	fillFile(t, path, now, n)
	damageBranchKey(t, path)
	snapshotBatch = 300 // 2000 windows: seven batches
	db, _ := openWindow(t, path, now)
	if err := db.Snapshot(); err != nil { // waits for the audit and its rebuild
		t.Fatal(err)
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("files kept aside: %v, want 1 (the file rebuilt)", aside)
	}
	if got := db.Stats().WindowsOnDisk; got != n {
		t.Fatalf("WindowsOnDisk after the rebuild = %d, want %d", got, n)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, _ = openWindow(t, path, now)
	defer db.Close()
	if got := db.Stats().WindowsOnDisk; got != n {
		t.Fatalf("WindowsOnDisk after a restart = %d, want %d", got, n)
	}
}

// TestRebuildCountsDamagedBlocks: a rebuild leaves out every block that
// fails its checksum, and those windows are lost; Stats.CorruptSkipped
// must count such blocks as well as the damaged pages that made the
// rebuild run. (Mutant: rebuild added only the damaged pages to the
// count, and every rebuild test's blocks were sound.)
func TestRebuildCountsDamagedBlocks(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	leaves, ps := windowLeaves(t, path)
	damageBranchKey(t, path) // damage to a page: the file is rebuilt
	// A flipped bit in the checksum of one block, inside a sound page.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	id := leaves[len(leaves)/2]
	var e [elemSize]byte
	off := int64(id)*ps + pageHeader + elemSize // element 1
	if _, err := f.ReadAt(e[:], off); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	last := off + int64(le.Uint32(e[4:])+le.Uint32(e[8:])+le.Uint32(e[12:])) - 1 // the value's last byte
	var b [1]byte
	if _, err := f.ReadAt(b[:], last); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b[:], last); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// The pages the audit after Open finds damaged.
	m, _, err := validateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f, err = os.Open(path); err != nil {
		t.Fatal(err)
	}
	a := newPageAudit(f, m)
	a.run(m.root)
	a.freelist(m.freelist)
	f.Close()
	if a.err != nil || a.damaged == 0 {
		t.Fatalf("the audit found %d damaged pages (%v), want the damaged branch", a.damaged, a.err)
	}

	db, _ := openWindow(t, path, now)
	defer db.Close()
	if err := db.Snapshot(); err != nil { // waits for the audit and its rebuild
		t.Fatal(err)
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("files kept aside: %v, want 1 (the file rebuilt)", aside)
	}
	if got, want := db.Stats().CorruptSkipped, int64(a.damaged)+1; got != want {
		t.Fatalf("CorruptSkipped = %d, want %d: %d damaged pages and the damaged block", got, want, a.damaged)
	}
}
