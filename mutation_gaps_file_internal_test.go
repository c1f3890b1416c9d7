package ratedb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/siphash"
)

// Tests for gaps that mutation testing of the file safety code (the page
// audit, rebuild, Verify, migration, the presence filter and Open's
// validation) found: each fails with the deliberate bug it names.

// TestGapFreelistOverflowOverLivePages: bbolt frees the old freelist page
// and every overflow page its header counts at the next commit, so a
// damaged overflow count that runs over live pages hands them out for new
// data. Open's checks pass such a file (the count stays below the file's
// page count); the audit after Open must count it and rebuild the file,
// keeping every window. (Mutant: the audit's freelist() no longer checked
// the freelist page's own span against the pages the walk reached.)
func TestGapFreelistOverflowOverLivePages(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	const n = 2000
	fillFile(t, path, now, n)
	fillFile(t, path, now, n)
	// A small commit takes its pages, the new freelist's among them, from
	// the pages the large ones freed: below live leaves.
	db, w := openWindow(t, path, now)
	if _, err := w.Inc(context.Background(), "another-key", 1); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	leaves, ps := windowLeaves(t, path)
	m, _, err := validateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	live := uint64(0)
	for _, id := range leaves {
		if id > m.freelist {
			live = max(live, id)
		}
	}
	if live == 0 {
		t.Fatalf("no live leaf after the freelist page %d (leaves %v)", m.freelist, leaves)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(live-m.freelist))
	if _, err := f.WriteAt(hdr[:], int64(m.freelist)*ps+12); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := validateFile(path); err != nil {
		t.Fatalf("Open's checks must pass this damage: %v", err)
	}

	db, w = openWindow(t, path, now)
	if err := db.Snapshot(); err != nil { // waits for the audit and its rebuild
		t.Fatal(err)
	}
	if got := db.Stats().CorruptSkipped; got < 1 {
		t.Fatalf("CorruptSkipped = %d, want the damaged freelist counted", got)
	}
	hitOnceAndCheckRebuilt(t, db, w, path, now, n)
}

// TestGapFileOnePageShort: a file that ends one page before the page count
// its meta page gives (truncated at a page boundary) is refused by Open
// with ErrCorrupt, and one that ends exactly there opens. Its last page is
// neither the root nor the freelist, whose reads would fail on their own.
// (Mutant: m.pgid > size/ps+1 in validateFile accepted the short file.)
func TestGapFileOnePageShort(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	fillFile(t, path, now, 2000)
	// A small commit takes its pages, the new freelist's among them, from
	// the pages the large ones freed: the last page is no longer the
	// freelist, which Open's other checks read.
	db, w := openWindow(t, path, now)
	if _, err := w.Inc(context.Background(), "another-key", 1); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	m, _, err := validateFile(path)
	ps := int64(m.pageSize)
	if err != nil {
		t.Fatal(err)
	}
	if m.pgid-1 == m.root || m.pgid-1 == m.freelist {
		t.Fatalf("the last page %d is the root or the freelist: Open's other checks would refuse the short file", m.pgid-1)
	}
	if err := os.Truncate(path, int64(m.pgid)*ps); err != nil {
		t.Fatal(err)
	}
	if _, _, err := validateFile(path); err != nil {
		t.Fatalf("a file that ends at its last page: %v", err)
	}
	if err := os.Truncate(path, int64(m.pgid-1)*ps); err != nil {
		t.Fatal(err)
	}
	if _, _, err := validateFile(path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("validateFile of a file one page short = %v, want ErrCorrupt", err)
	}
	if db, err := Open(path, &Options{SnapshotPeriod: -1, CleanPeriod: -1}); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			db.Close()
		}
		t.Fatalf("Open of a file one page short = %v, want ErrCorrupt", err)
	}
}

// TestGapFreelistValidRefusesRepeatedIDs: the freelist Open accepts lists
// each page once, in increasing order, between the meta pages and the
// page count, as bbolt writes it: a page listed twice is damage (bbolt's
// map freelist would count it free twice), and so is a meta page. (Mutant: id < prev instead of id <= prev in
// freelistValid accepted a repeated id, and no test repeated one;
// prev starting at 0 accepted page 1, a meta page.)
func TestGapFreelistValidRefusesRepeatedIDs(t *testing.T) {
	const pgid = 10
	for _, tc := range []struct {
		name string
		ids  []uint64
		want bool
	}{
		{"increasing", []uint64{2, 5, 9}, true},
		{"empty", nil, true},
		{"repeated", []uint64{2, 5, 5, 9}, false},
		{"decreasing", []uint64{5, 2}, false},
		{"a meta page", []uint64{1, 5}, false},
		{"the page count", []uint64{5, pgid}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ps = 512
			b := make([]byte, ps)
			binary.LittleEndian.PutUint16(b[8:], pageFreelist)
			binary.LittleEndian.PutUint16(b[10:], uint16(len(tc.ids)))
			for i, id := range tc.ids {
				binary.LittleEndian.PutUint64(b[pageHeader+8*i:], id)
			}
			got, err := freelistValid(bytes.NewReader(b), 0, ps, pgid)
			if err != nil || got != tc.want {
				t.Fatalf("freelistValid(%v) = %t, %v; want %t", tc.ids, got, err, tc.want)
			}
		})
	}
}

// leafPage builds leaf page id of ps bytes holding keys, each with a
// one-byte value, as bbolt lays them out.
func leafPage(id uint64, ps int, keys ...string) []byte {
	le := binary.LittleEndian
	b := make([]byte, ps)
	le.PutUint64(b, id)
	le.PutUint16(b[8:], pageLeaf)
	le.PutUint16(b[10:], uint16(len(keys)))
	data := pageHeader + len(keys)*elemSize
	for i, k := range keys {
		e := b[pageHeader+i*elemSize:]
		le.PutUint32(e[4:], uint32(data-(pageHeader+i*elemSize)))
		le.PutUint32(e[8:], uint32(len(k)))
		le.PutUint32(e[12:], 1)
		data += copy(b[data:], k)
		b[data] = 'v'
		data++
	}
	return b
}

// TestGapCheckPageRefusesRepeatedKeys: bbolt's binary searches need the
// keys of a page strictly increasing; a damaged key equal to its
// neighbour hides one of the two from every look-up, so the audit must
// count the page as damaged. (Mutant: bytes.Compare(prev, k) > 0 in
// checkPage accepted two equal keys, and no test had any.)
func TestGapCheckPageRefusesRepeatedKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		want bool
	}{
		{"increasing", []string{"a", "b", "c"}, true},
		{"repeated", []string{"a", "b", "b", "c"}, false},
		{"decreasing", []string{"b", "a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := leafPage(7, 512, tc.keys...)
			if got := checkPage(b, 7, false, nil, nil); got != tc.want {
				t.Fatalf("checkPage of a leaf with keys %q = %t, want %t", tc.keys, got, tc.want)
			}
		})
	}
}

// TestGapSalvageKeepsTheCopyThatAllowsLess: damage can leave two copies of
// one window in a damaged file (a stale one reached through a damaged
// branch), and rebuild keeps the one that allows less: the later window
// end, then, for the same end, the larger count, whatever order the walk
// found them in. (Mutants: salvage comparing the ends, or the totals, the
// other way round kept the stale copy, and no test had two copies.)
func TestGapSalvageKeepsTheCopyThatAllowsLess(t *testing.T) {
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

// TestGapRebuildCountsWindowsAcrossBatches: a rebuild writes its windows
// in transactions of snapshotBatch; the count it stores in the file is the
// total of every batch, so a restart reads the file's true window count.
// (Mutant: putCount(tx, w.delta) stored only the last batch's windows, and
// no rebuild test wrote more than one batch.)
func TestGapRebuildCountsWindowsAcrossBatches(t *testing.T) {
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
