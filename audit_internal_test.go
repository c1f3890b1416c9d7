package ratedb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
)

// windowLeaves returns the ids of the leaf pages of the blocks bucket of
// the (closed) file at path, and its page size.
func windowLeaves(t *testing.T, path string) ([]uint64, int64) {
	t.Helper()
	m, _, err := validateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var leaves []uint64
	a := newPageAudit(f, m)
	a.visit = func(id uint64, bucket string, page []byte) {
		if bucket == string(layout.BucketBlocks) && binary.LittleEndian.Uint16(page[8:]) == pageLeaf {
			leaves = append(leaves, id)
		}
	}
	a.run(m.root)
	if a.err != nil || a.damaged != 0 {
		t.Fatalf("sound file: %d damaged pages, %v", a.damaged, a.err)
	}
	if len(leaves) < 3 {
		t.Fatalf("%d leaf pages in the blocks bucket; want several", len(leaves))
	}
	return leaves, int64(m.pageSize)
}

// blockKeys returns the keys (without the spec prefix) of the windows of
// the block in element i of the leaf page at id of the file at path.
func blockKeys(t *testing.T, path string, ps int64, id uint64, i int) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := data[int64(id)*ps : int64(id+1)*ps]
	e := page[pageHeader+i*elemSize:]
	le := binary.LittleEndian
	pos, ksize, vsize := le.Uint32(e[4:]), le.Uint32(e[8:]), le.Uint32(e[12:])
	start := pageHeader + i*elemSize + int(pos)
	var b record.Block
	if err := record.DecodeBlock(&b, page[start:start+int(ksize)], page[start+int(ksize):start+int(ksize+vsize)]); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, w := range b.Windows {
		keys[string(w.Key[9:])] = true // an hourly FixedWindow's prefix
	}
	return keys
}

// damageVsize sets the value size of element i of the page at id to a
// value almost 2 GiB long, as one flipped bit in its top byte would.
func damageVsize(t *testing.T, f *os.File, ps int64, id uint64, i int) {
	t.Helper()
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], 0x7fff_ff00)
	if _, err := f.WriteAt(b[:], int64(id)*ps+pageHeader+int64(i)*elemSize+12); err != nil {
		t.Fatal(err)
	}
}

// openWindow opens path with the clock fixed at now and no background work,
// and returns the DB and an hourly FixedWindow of it.
func openWindow(t testing.TB, path string, now time.Time) (*DB, *Window) {
	t.Helper()
	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.Window(FixedWindow, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return db, w
}

// fillFile hits n keys of an hourly FixedWindow in the file at path, key i
// 1+i%7 times, and closes it.
func fillFile(t testing.TB, path string, now time.Time, n int) {
	t.Helper()
	db, w := openWindow(t, path, now)
	for i := range n {
		if _, err := w.Inc(context.Background(), fmt.Sprintf("audit-key-%04d", i), int64(1+i%7)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRebuildDamagedPage damages one element of a leaf page the way a flipped
// bit in its value size would: bbolt would copy a 2 GiB value out of its map
// at the first commit that rewrites the page. The audit after Open must find
// the page, and the file must be rebuilt before anything writes to it: every
// window of every other block kept, the damage counted, the old file kept
// aside.
func TestRebuildDamagedPage(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	const n = 2000
	fillFile(t, path, now, n)
	leaves, ps := windowLeaves(t, path)
	lost := blockKeys(t, path, ps, leaves[len(leaves)/2], 1)
	// A look-up of a window of the block before it can land on it too
	// (bbolt's Seek reads the value of the element it stops at).
	near := blockKeys(t, path, ps, leaves[len(leaves)/2], 0)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	damageVsize(t, f, ps, leaves[len(leaves)/2], 1)
	f.Close()

	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	db, w := openWindow(t, path, now)
	ctx := context.Background()
	// A write that lands on the damaged page: every key is hit once more.
	// Until the rebuild is done, a read of the damaged element can make
	// bbolt panic: that call returns ErrCorrupt and counts nothing.
	failed := map[int]bool{}
	for i := range n {
		k := fmt.Sprintf("audit-key-%04d", i)
		if _, err := w.Inc(ctx, k, 1); errors.Is(err, ErrCorrupt) {
			if !lost[k] && !near[k] {
				t.Fatalf("Inc of key %d, not in or next to the damaged block, failed: %v", i, err)
			}
			failed[i] = true
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Snapshot(); err != nil {
		t.Fatalf("Snapshot after the rebuild: %v", err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
		t.Fatalf("allocated %d MiB: the damaged page was rewritten", got>>20)
	}
	if got := db.Stats().CorruptSkipped; got < 1 {
		t.Fatalf("CorruptSkipped = %d, want the damage counted", got)
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("files kept aside: %v, want 1", aside)
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("Verify after the rebuild: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// After a restart every window but those of the damaged block has its
	// count and the one hit; those started fresh with that hit, or hold
	// nothing if their Inc failed.
	db, w = openWindow(t, path, now)
	defer db.Close()
	fresh := 0
	for i := range n {
		got, err := w.Get(ctx, fmt.Sprintf("audit-key-%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("audit-key-%04d", i)
		want, fresh1 := int64(2+i%7), int64(1)
		if failed[i] {
			want, fresh1 = want-1, 0
		}
		switch {
		case got == want && !lost[k]:
		case got == fresh1 && lost[k]:
			fresh++
		default:
			t.Fatalf("key %d (in the damaged block: %t) reads %d, want %d (%d if its block was lost)", i, lost[k], got, want, fresh1)
		}
	}
	if fresh != len(lost) || fresh == 0 {
		t.Fatalf("%d windows lost, want the damaged block's %d", fresh, len(lost))
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("Verify after a restart: %v", err)
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("files kept aside after a restart: %v, want still 1", aside)
	}
}

// TestRebuildFails: when a damaged file cannot be rebuilt, ratedb must not
// write to it. Hits go on in memory; snapshots and Close report ErrCorrupt;
// the file is left as it was, and the next Open rebuilds it.
func TestRebuildFails(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	leaves, ps := windowLeaves(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	damageVsize(t, f, ps, leaves[1], 2)
	f.Close()
	damaged, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	testRebuildHook = func() error { return errors.New("injected: no space left") }
	defer func() { testRebuildHook = nil }()
	db, w := openWindow(t, path, now)
	ctx := context.Background()
	// Counts go on in memory. A new key's look-up in the file lands in the
	// damaged page for about one file in a hundred (the file's hash key is
	// random) and is ErrCorrupt: then another key is tried.
	for i := 0; ; i++ {
		res, err := w.Hit(ctx, fmt.Sprintf("a-new-key-%d", i), 10, 1)
		if errors.Is(err, ErrCorrupt) && i < 10 {
			continue
		}
		if err != nil || !res.Allowed || res.Count != 1 {
			t.Fatalf("Hit = %+v, %v; want allowed, count 1", res, err)
		}
		break
	}
	if err := db.Snapshot(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Snapshot = %v, want ErrCorrupt", err)
	}
	if _, err := db.Clean(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Clean = %v, want ErrCorrupt", err)
	}
	if st := db.Stats(); st.SnapshotFailures == 0 || !errors.Is(st.LastSnapshotError, ErrCorrupt) {
		t.Fatalf("Stats = %+v, want the failed snapshot counted", st)
	}
	if err := db.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Close = %v, want ErrCorrupt", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(damaged) {
		t.Fatal("the damaged file was written to")
	}

	testRebuildHook = nil
	db, _ = openWindow(t, path, now)
	defer db.Close()
	if err := db.Snapshot(); err != nil {
		t.Fatalf("Snapshot after a rebuild: %v", err)
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("Verify after a rebuild: %v", err)
	}
}

// TestRebuildFailsIdle: the package documentation says that once a damaged
// file could not be rebuilt, snapshots, Clean and Close return ErrCorrupt.
// With no window changed since Open, Snapshot and Close returned nil and
// Stats.LastSnapshotError stayed nil, so a health check saw a DB that does
// not write its file as sound.
func TestRebuildFailsIdle(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	leaves, ps := windowLeaves(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	damageVsize(t, f, ps, leaves[1], 2)
	f.Close()

	testRebuildHook = func() error { return errors.New("injected: no space left") }
	defer func() { testRebuildHook = nil }()
	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	// Snapshot waits for the audit after Open, which fails to rebuild.
	if err := db.Snapshot(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Snapshot with nothing changed = %v, want ErrCorrupt", err)
	}
	if st := db.Stats(); st.SnapshotFailures != 1 || !errors.Is(st.LastSnapshotError, ErrCorrupt) {
		t.Fatalf("Stats: SnapshotFailures %d, LastSnapshotError %v; want 1 and ErrCorrupt", st.SnapshotFailures, st.LastSnapshotError)
	}
	if _, err := db.Clean(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Clean = %v, want ErrCorrupt", err)
	}
	if err := db.Close(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Close with nothing changed = %v, want ErrCorrupt", err)
	}
}

// TestFreelistListingLivePage damages the freelist so that it lists a live
// leaf page (ids still valid and in order, so Open's checks pass): bbolt
// would hand that page out for the next snapshot's data and overwrite
// windows. The audit must find it and rebuild; no window may be lost.
func TestFreelistListingLivePage(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	const n = 2000
	fillFile(t, path, now, n)
	fillFile(t, path, now, n) // rewrites every window: the old pages are now free
	leaves, ps := windowLeaves(t, path)
	m, _, err := validateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, ps)
	if _, err := f.ReadAt(b, int64(m.freelist)*ps); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	count := int(le.Uint16(b[10:]))
	if count == 0 || count == 0xFFFF || binary.LittleEndian.Uint32(b[12:]) != 0 {
		t.Fatalf("freelist of %d ids; the test wants a short one-page list", count)
	}
	ids := make([]uint64, count)
	for i := range ids {
		ids[i] = le.Uint64(b[pageHeader+8*i:])
	}
	// Put the live leaf in the list in its place, dropping the largest id.
	live := leaves[0]
	ids = append(ids[:count-1], live)
	slices.Sort(ids)
	for i, id := range ids {
		le.PutUint64(b[pageHeader+8*i:], id)
	}
	if _, err := f.WriteAt(b, int64(m.freelist)*ps); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := validateFile(path); err != nil {
		t.Fatalf("Open's checks must pass this damage: %v", err)
	}

	db, w := openWindow(t, path, now)
	hitOnceAndCheckRebuilt(t, db, w, path, now, n)
}

// hitOnceAndCheckRebuilt adds one hit to each of the n keys fillFile wrote
// through w, closes db, and checks that the file was rebuilt (one file kept
// aside) with every count whole: the fill's plus that hit, after a restart.
func hitOnceAndCheckRebuilt(t *testing.T, db *DB, w *Window, path string, now time.Time, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := w.Inc(ctx, fmt.Sprintf("audit-key-%04d", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if aside, _ := filepath.Glob(path + ".corrupt-*"); len(aside) != 1 {
		t.Fatalf("files kept aside: %v, want 1 (the file rebuilt)", aside)
	}
	db, w = openWindow(t, path, now)
	defer db.Close()
	for i := range n {
		got, err := w.Get(ctx, fmt.Sprintf("audit-key-%04d", i))
		if want := int64(3 + 2*(i%7)); err != nil || got != want {
			t.Fatalf("key %d reads %d, %v; want %d", i, got, err, want)
		}
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestRebuildLeftoversRemoved: a rebuild cut short by a crash leaves its
// new file behind; the next Open removes it.
func TestRebuildLeftoversRemoved(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 10)
	stale := path + ".rebuild-123456"
	if err := os.WriteFile(stale, []byte("half a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, w := openWindow(t, path, now)
	defer db.Close()
	if err := db.Snapshot(); err != nil { // waits for the audit
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the leftover of a rebuild is still there: %v", err)
	}
	if got, err := w.Get(context.Background(), "audit-key-0007"); err != nil || got != 1 {
		t.Fatalf("Get = %d, %v; want 1", got, err)
	}
}

// TestRebuildLeftoversOfThisFileOnly: the leftovers removed are those of
// this file's rebuilds, whatever its name holds: a name with glob
// characters ("rate[1].db") must neither remove another file's rebuild in
// the same directory ("rate1.db"'s, maybe under way) nor keep its own. Nor
// may it remove a file whose name only begins like its rebuilds' (they
// matched by prefix): an operator's "rate[1].db.rebuild-old", or the
// rebuild of a file named "rate[1].db.rebuild-2".
func TestRebuildLeftoversOfThisFileOnly(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	dir := t.TempDir()
	path := filepath.Join(dir, "rate[1].db")
	fillFile(t, path, now, 10)
	other := filepath.Join(dir, "rate1.db.rebuild-123456")
	own := path + ".rebuild-654321"
	operators := path + ".rebuild-old"
	another := path + ".rebuild-2.rebuild-123456"
	for _, p := range []string{other, own, operators, another} {
		if err := os.WriteFile(p, []byte("half a file"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db, _ := openWindow(t, path, now)
	defer db.Close()
	if err := db.Snapshot(); err != nil { // waits for the audit
		t.Fatal(err)
	}
	for _, p := range []string{other, operators, another} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s, no leftover of this file's rebuilds, was removed: %v", filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(own); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the leftover of this file's rebuild is still there: %v", err)
	}
}

// TestRebuildThroughSymlink: Open of a symbolic link to the file (a state
// file kept on a mounted volume, say) whose audit finds damage rebuilds the
// file the link points to: the link stays a link, to the rebuilt file, and
// the rebuild is not written into the link's directory in its place (which
// may be on other storage, or read-only).
func TestRebuildThroughSymlink(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "volume"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "volume", "rate.db")
	link := filepath.Join(dir, "rate.db")
	const n = 2000
	fillFile(t, target, now, n)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	damageBranchKey(t, target)

	db, w := openWindow(t, link, now)
	if err := db.Snapshot(); err != nil { // waits for the audit and its rebuild
		t.Fatal(err)
	}
	if got := db.Stats().CorruptSkipped; got < 1 {
		t.Fatalf("CorruptSkipped = %d, want the damage counted", got)
	}
	if _, err := w.Inc(context.Background(), "audit-key-0001", 1); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symbolic link was replaced (%v, %v)", fi.Mode(), err)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "volume", "rate.db.corrupt-*")); len(aside) != 1 {
		t.Fatalf("damaged files kept beside the file: %v, want 1", aside)
	}
	db, w = openWindow(t, target, now)
	defer db.Close()
	for i := range n {
		want := int64(1 + i%7)
		if i == 1 {
			want++
		}
		if got, err := w.Get(context.Background(), fmt.Sprintf("audit-key-%04d", i)); err != nil || got != want {
			t.Fatalf("key %d reads %d, %v from the file the link points to; want %d", i, got, err, want)
		}
	}
}

// TestVerifyFindsDamagedPage damages a page while the file is open, past the
// audit after Open: Verify must report it.
func TestVerifyFindsDamagedPage(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	leaves, ps := windowLeaves(t, path)
	db, _ := openWindow(t, path, now)
	defer db.Close()
	if err := db.Snapshot(); err != nil { // waits for the audit
		t.Fatal(err)
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("sound file: %v", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	damageVsize(t, f, ps, leaves[0], 0)
	f.Close()
	err = db.Verify()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "1 damaged pages") {
		t.Fatalf("Verify = %v, want ErrCorrupt for 1 damaged page", err)
	}
}

// FuzzCheckPage feeds checkPage arbitrary pages: it must never panic, and
// everything it hands out must lie inside the page.
func FuzzCheckPage(f *testing.F) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(f.TempDir(), "rate.db")
	db, w := openWindow(f, path, now)
	for i := range 300 {
		_, _ = w.Inc(context.Background(), fmt.Sprintf("fuzz-key-%04d", i), 1)
	}
	if err := db.Close(); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	for id := uint64(2); int(id+1)*4096 <= len(data); id++ {
		f.Add(data[id*4096:(id+1)*4096], id, false)
	}
	f.Add([]byte{}, uint64(0), true)
	f.Fuzz(func(t *testing.T, page []byte, id uint64, inline bool) {
		page = page[:len(page):len(page)] // a slice of it can then reach no further
		inside := func(s []byte) {
			if cap(s) > len(page) {
				t.Fatalf("a slice of %d bytes (cap %d) from a page of %d", len(s), cap(s), len(page))
			}
		}
		kids := 0
		ok := checkPage(page, id, inline, func(k, v []byte, _ uint32) bool {
			inside(k)
			inside(v)
			return true
		}, func(_ uint64, key []byte) { inside(key); kids++ })
		if ok && len(page) < pageHeader {
			t.Fatal("a page shorter than its header passed")
		}
		if ok && kids > 0 && (len(page)-pageHeader)/elemSize < kids {
			t.Fatalf("%d children from a page of %d bytes", kids, len(page))
		}
	})
}

// branchOf returns the id of a branch page of bucket in the closed file at
// path, its number of elements, and the page size.
func branchOf(t *testing.T, path, bucket string) (uint64, int, int64) {
	t.Helper()
	m, _, err := validateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := newPageAudit(f, m)
	var id uint64
	var count int
	a.visit = func(pid uint64, b string, page []byte) {
		if b == bucket && id == 0 && binary.LittleEndian.Uint16(page[8:]) == pageBranch {
			id, count = pid, int(binary.LittleEndian.Uint16(page[10:]))
		}
	}
	a.run(m.root)
	if a.err != nil || a.damaged != 0 || id == 0 || count < 2 {
		t.Fatalf("no branch page of %d+ elements in bucket %q (damaged %d, %v)", 2, bucket, a.damaged, a.err)
	}
	return id, count, int64(m.pageSize)
}

// pointChildAt makes element i of the branch page id point to page to, as
// damage to its child id would.
func pointChildAt(t *testing.T, path string, ps int64, id uint64, i int, to uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], to)
	if _, err := f.WriteAt(b[:], int64(id)*ps+pageHeader+int64(i)*elemSize+8); err != nil {
		t.Fatal(err)
	}
}

// TestBranchKeyDamageIsRebuilt: a flipped byte in a key of a branch page
// of the blocks bucket. bbolt would send look-ups of the windows below it
// to another page, where they find nothing: lost without a sign. The audit
// after Open checks that every branch key is its child's first key and
// that keys are in order, so the file is rebuilt from its blocks, which are
// all sound: every window reads back.
// damageBranchKey flips a bit in the last byte of a middle key of a branch
// page of the file's blocks tree: damage the audit after Open finds and
// rebuilds.
func damageBranchKey(t *testing.T, path string) {
	t.Helper()
	id, count, ps := branchOf(t, path, string(layout.BucketBlocks))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var e [elemSize]byte
	off := int64(id)*ps + pageHeader + int64(count/2)*elemSize
	if _, err := f.ReadAt(e[:], off); err != nil {
		t.Fatal(err)
	}
	key := off + int64(binary.LittleEndian.Uint32(e[0:])) + 7 // the key's last byte
	var b [1]byte
	if _, err := f.ReadAt(b[:], key); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b[:], key); err != nil {
		t.Fatal(err)
	}
}

// TestRebuildKeepsTheFileMode: the rebuilt file has the permissions of the
// file it replaces (os.CreateTemp makes 0600), so a group that could read
// the file (a backup job, inspect run by an operator) still can.
func TestRebuildKeepsTheFileMode(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	damageBranchKey(t, path)
	db, _ := openWindow(t, path, now)
	defer db.Close()
	if err := db.Snapshot(); err != nil { // waits for the audit and its rebuild
		t.Fatal(err)
	}
	if got := db.Stats().CorruptSkipped; got < 1 {
		t.Fatalf("CorruptSkipped = %d, want the damage rebuilt", got)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o640 {
		t.Fatalf("the rebuilt file's mode is %v, want -rw-r-----", fi.Mode().Perm())
	}
}

func TestBranchKeyDamageIsRebuilt(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	const n = 2000
	fillFile(t, path, now, n)
	damageBranchKey(t, path)

	db, w := openWindow(t, path, now)
	defer db.Close()
	if err := db.Snapshot(); err != nil { // waits for the audit and its rebuild
		t.Fatal(err)
	}
	if got := db.Stats().CorruptSkipped; got < 1 {
		t.Fatalf("CorruptSkipped = %d, want the damage counted", got)
	}
	ctx := context.Background()
	for i := range n {
		got, err := w.Get(ctx, fmt.Sprintf("audit-key-%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(1 + i%7); got != want {
			t.Fatalf("key %d reads %d, the file held %d", i, got, want)
		}
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("Verify of the rebuilt file: %v", err)
	}
}

// TestAuditReadErrorStopsWrites: the package documentation says that when
// the audit after Open cannot read the file (EIO: a bad sector, a flaky
// network disk), the DB stops writing it, as when a rebuild fails, but
// snapshots, Clean and Close return the read error, wrapped, not
// ErrCorrupt (a failed read says nothing about the file's bytes, as for
// Open). Hits go on in memory, the file is left as it was, and the next
// Open, whose audit reads the file, opens it with its counts.
func TestAuditReadErrorStopsWrites(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 100)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	// Open's validation reads the file first; the audit's reads fail.
	var reads atomic.Int32
	testValidateReader = func(r io.ReaderAt) io.ReaderAt {
		if reads.Add(1) == 1 {
			return r
		}
		return eioReader{r: r, at: 0}
	}
	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		testValidateReader = nil
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	w, err := db.Window(FixedWindow, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Snapshot waits for the audit, which then has run: the hook can go.
	err = db.Snapshot()
	testValidateReader = nil
	if got := reads.Load(); got != 2 {
		t.Fatalf("the file was validated %d times, want 2 (Open, then the audit)", got)
	}
	if !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Snapshot with nothing changed = %v, want the audit's EIO, not ErrCorrupt", err)
	}
	ctx := context.Background()
	if res, err := w.Hit(ctx, "audit-key-0001", 100, 1); err != nil || !res.Allowed || res.Count != 3 {
		t.Fatalf("Hit = %+v, %v; want allowed, count 3 (2 from the file)", res, err)
	}
	if err := db.Snapshot(); !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Snapshot = %v, want the audit's EIO, not ErrCorrupt", err)
	}
	if st := db.Stats(); st.SnapshotFailures != 2 || !errors.Is(st.LastSnapshotError, syscall.EIO) {
		t.Fatalf("Stats: SnapshotFailures %d, LastSnapshotError %v; want 2 and EIO", st.SnapshotFailures, st.LastSnapshotError)
	}
	if _, err := db.Clean(); !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Clean = %v, want the audit's EIO, not ErrCorrupt", err)
	}
	if err := db.Close(); !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Close = %v, want the audit's EIO, not ErrCorrupt", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatal("the file the audit could not read was written to")
	}

	db, w = openWindow(t, path, now)
	defer db.Close()
	if err := db.Snapshot(); err != nil {
		t.Fatalf("Snapshot after a reopen: %v", err)
	}
	if n, err := w.Get(ctx, "audit-key-0001"); err != nil || n != 2 {
		t.Fatalf("Get after a reopen = %d, %v; want 2, the count in the file", n, err)
	}
}

// TestFreelistOverflowOverLivePages: bbolt frees the old freelist page
// and every overflow page its header counts at the next commit, so a
// damaged overflow count that runs over live pages hands them out for new
// data. Open's checks pass such a file (the count stays below the file's
// page count); the audit after Open must count it and rebuild the file,
// keeping every window. (Mutant: the audit's freelist() no longer checked
// the freelist page's own span against the pages the walk reached.)
func TestFreelistOverflowOverLivePages(t *testing.T) {
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

// TestCheckPageRefusesRepeatedKeys: bbolt's binary searches need the
// keys of a page strictly increasing; a damaged key equal to its
// neighbour hides one of the two from every look-up, so the audit must
// count the page as damaged. (Mutant: bytes.Compare(prev, k) > 0 in
// checkPage accepted two equal keys, and no test had any.)
func TestCheckPageRefusesRepeatedKeys(t *testing.T) {
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

// TestCheckPageRefusesEmptyBranch: a branch page with no elements leads
// nowhere (bbolt never writes one; a look-up in it reads an element that
// is not there), so the audit counts it as damaged; an empty leaf is a
// sound empty bucket, and a branch of one element is sound. (Mutant:
// checkPage accepted a branch page whose count is 0.)
func TestCheckPageRefusesEmptyBranch(t *testing.T) {
	const id, ps = 7, 512
	branch := func(keys ...string) []byte {
		le := binary.LittleEndian
		b := make([]byte, ps)
		le.PutUint64(b, id)
		le.PutUint16(b[8:], pageBranch)
		le.PutUint16(b[10:], uint16(len(keys)))
		data := pageHeader + len(keys)*elemSize
		for i, k := range keys {
			e := b[pageHeader+i*elemSize:]
			le.PutUint32(e[0:], uint32(data-(pageHeader+i*elemSize)))
			le.PutUint32(e[4:], uint32(len(k)))
			le.PutUint64(e[8:], uint64(id+1+i))
			data += copy(b[data:], k)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		page []byte
		want bool
	}{
		{"empty branch", branch(), false},
		{"branch of one element", branch("a"), true},
		{"empty leaf", leafPage(id, ps), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkPage(tc.page, id, false, nil, nil); got != tc.want {
				t.Fatalf("checkPage = %t, want %t", got, tc.want)
			}
		})
	}
}
