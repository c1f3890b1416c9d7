package ratedb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	bolt "go.etcd.io/bbolt"
)

// runChild runs the calling test again in a child process with
// RATEDB_TEST_CHILD=1 and fails if the child crashes, is killed or runs
// longer than limit: a fatal runtime error (stack overflow, out of memory)
// cannot be recovered, so only a parent can see it. It returns true in the
// child, which runs the test's body.
func runChild(t *testing.T, limit time.Duration) bool {
	t.Helper()
	if os.Getenv("RATEDB_TEST_CHILD") == "1" {
		// Keep a runaway child small: a goroutine stack of 64 MiB (the
		// default limit is 1 GB) and 6 GiB of address space (room for two
		// bbolt maps of 1 GiB while a rebuild runs). Both only make the
		// same failure come sooner.
		debug.SetMaxStack(64 << 20)
		_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: 6 << 30, Max: 6 << 30})
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
	cmd.Env = append(os.Environ(), "RATEDB_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("child hung (killed after %v); output:\n%s", limit, firstLines(out))
	}
	if err != nil {
		t.Fatalf("child failed: %v; output:\n%s", err, firstLines(out))
	}
	return false
}

func firstLines(b []byte) string {
	s := string(b)
	lines := strings.Split(s, "\n")
	if len(lines) > 12 {
		lines = lines[:12]
	}
	return strings.Join(lines, "\n")
}

// TestCycleInBlocksTreeWhileRebuildFails: a branch page of the blocks
// bucket whose child id points back at itself. bbolt's Seek would recurse
// down the cycle until the goroutine's stack overflowed, a fatal error no
// recover catches. Open finds the cycle (layout.CheckTree): look-ups in the
// file fail with ErrCorrupt, and go on failing while the rebuild cannot run
// (here it fails, as on a full disk).
func TestCycleInBlocksTreeWhileRebuildFails(t *testing.T) {
	if !runChild(t, 60*time.Second) {
		return
	}
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	const n = 2000
	fillFile(t, path, now, n)
	id, count, ps := branchOf(t, path, string(layout.BucketBlocks))
	pointChildAt(t, path, ps, id, count/2, id)

	testRebuildHook = func() error { return errors.New("injected: no space left") }
	defer func() { testRebuildHook = nil }()
	db, w := openWindow(t, path, now)
	defer db.Close()
	_ = db.Snapshot() // waits for the audit (and the failed rebuild)
	for i := range n {
		_, err := w.Inc(context.Background(), fmt.Sprintf("audit-key-%04d", i), 1)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Inc of a key in the file = %v, want ErrCorrupt", err)
		}
	}
}

// TestCycleInBlocksTreeBeforeRebuild: the same damage, with hits made while
// the audit's rebuild has not yet replaced the file (on a large file it
// takes seconds; the hook holds it here). They fail with ErrCorrupt, and
// once the file is rebuilt every window of it reads again.
func TestCycleInBlocksTreeBeforeRebuild(t *testing.T) {
	if !runChild(t, 60*time.Second) {
		return
	}
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	const n = 2000
	fillFile(t, path, now, n)
	id, count, ps := branchOf(t, path, string(layout.BucketBlocks))
	pointChildAt(t, path, ps, id, count/2, id)

	release := make(chan struct{})
	testRebuildHook = func() error { <-release; return nil }
	defer func() { testRebuildHook = nil }()
	db, w := openWindow(t, path, now)
	defer db.Close()
	ctx := context.Background()
	for i := range n {
		_, err := w.Inc(ctx, fmt.Sprintf("audit-key-%04d", i), 1)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Inc of a key in the file = %v, want ErrCorrupt", err)
		}
	}
	close(release)
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	found := 0
	for i := range n {
		c, err := w.Get(ctx, fmt.Sprintf("audit-key-%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		if c > 0 {
			found++
		}
	}
	// The rebuild keeps every block in a sound place: all but those
	// below the damaged link.
	if found == 0 || found == n {
		t.Fatalf("after the rebuild %d of %d windows read back; want most, not all (the cycle hid a subtree)", found, n)
	}
	t.Logf("after the rebuild %d of %d windows read back", found, n)
}

// TestCycleInFormat1File: a ratedb/1 file whose windows bucket has a
// branch page pointing at itself. Open migrates it before any audit and
// must return an error, not crash or hang.
func TestCycleInFormat1File(t *testing.T) {
	if !runChild(t, 60*time.Second) {
		return
	}
	path := filepath.Join(t.TempDir(), "rate.db")
	prefix := specPrefix(FixedWindow, []int64{3_600_000}, false)
	end := fixtureBase.Add(time.Hour).UnixMilli()
	recs := map[string][]counter{}
	for i := range 5000 {
		recs[string(prefix)+fmt.Sprintf("key-%05d", i)] = []counter{{Count: 1, End: end}}
	}
	writeFormat1(t, path, recs, nil)
	id, count, ps := branchOf(t, path, string(layout.LegacyBucketWindows))
	pointChildAt(t, path, ps, id, count/2, id)

	openWantCorrupt(t, path, &Options{Clock: func() time.Time { return fixtureBase }, SnapshotPeriod: -1, CleanPeriod: -1})
}

// TestCycleInRootPage: the root bucket's page turned into a branch
// page whose one child is itself (a damaged page type and count, or a
// foreign bbolt file). validateFile accepts a branch root; bbolt's look-up
// of the meta bucket in loadFile then recurses without end. Open must
// return ErrCorrupt.
func TestCycleInRootPage(t *testing.T) {
	if !runChild(t, 60*time.Second) {
		return
	}
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 10)
	m, _, err := validateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int64(m.pageSize)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var p [pageHeader + elemSize]byte
	le := binary.LittleEndian
	le.PutUint64(p[0:], m.root)
	le.PutUint16(p[8:], pageBranch)
	le.PutUint16(p[10:], 1)
	le.PutUint32(p[16:], elemSize) // the key right after the element: empty
	le.PutUint32(p[20:], 0)
	le.PutUint64(p[24:], m.root)
	if _, err := f.WriteAt(p[:], int64(m.root)*ps); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, oc := range []CorruptPolicy{CorruptFail, CorruptMoveAside} {
		db, err := Open(path, &Options{SnapshotPeriod: -1, CleanPeriod: -1, OnCorrupt: oc})
		if oc == CorruptFail && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want ErrCorrupt", err)
		}
		if db != nil {
			db.Close()
		}
	}
}

// TestNoFreelistDamagedPage: a file whose meta page records no freelist
// (written by bbolt with NoFreelistSync, as other applications' files can
// be) and one damaged page header (its id). bbolt's Open would rebuild the
// freelist by walking every page on a goroutine of its own, where the
// damaged page's panic cannot be recovered: Open must return ErrCorrupt.
func TestNoFreelistDamagedPage(t *testing.T) {
	if !runChild(t, 60*time.Second) {
		return
	}
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	// One write by a bbolt that does not sync its freelist.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(layout.BucketMeta).Put([]byte("x"), []byte("y"))
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	m, _, err := validateFile(path)
	if err != nil || m.freelist != ^uint64(0) {
		t.Fatalf("validateFile = %+v, %v; want a meta without freelist", m, err)
	}
	leaves, ps := windowLeaves(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], leaves[1]+12345) // the page's own id, damaged
	if _, err := f.WriteAt(b[:], int64(leaves[1])*ps); err != nil {
		t.Fatal(err)
	}
	f.Close()
	openWantCorrupt(t, path, &Options{SnapshotPeriod: -1, CleanPeriod: -1})
}

// damageInlineBucket turns the inline page of bucket (kept inside the
// root bucket's leaf page: Root() == 0, which checkTrees skips) into a
// branch page whose elements' child ids are 0, as damage to its flags and
// to its elements' key and value sizes would. For an inline
// bucket, bbolt's pageNode(0) is the inline page itself: a Seek recurses
// until the goroutine's stack overflows, a fatal error.
func damageInlineBucket(t *testing.T, path string, bucket []byte) {
	t.Helper()
	m, _, err := validateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int64(m.pageSize)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	root := data[int64(m.root)*ps : int64(m.root+1)*ps]
	if le.Uint16(root[8:]) != pageLeaf {
		t.Fatalf("root page is not a leaf")
	}
	inline := -1
	for i := range int(le.Uint16(root[10:])) {
		off := pageHeader + i*elemSize
		pos, ks := int(le.Uint32(root[off+4:])), int(le.Uint32(root[off+8:]))
		if bytes.Equal(root[off+pos:off+pos+ks], bucket) {
			v := off + pos + ks
			if le.Uint64(root[v:]) != 0 {
				t.Fatalf("bucket %s is not inline", bucket)
			}
			inline = v + bucketHdrSize
		}
	}
	if inline < 0 || le.Uint16(root[inline+10:]) == 0 {
		t.Fatalf("no inline bucket %s with elements", bucket)
	}
	le.PutUint16(root[inline+8:], pageBranch) // flags
	for i := range int(le.Uint16(root[inline+10:])) {
		le.PutUint64(root[inline+pageHeader+i*elemSize+8:], 0) // ksize, vsize: as a branch element, its child id
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(root, int64(m.root)*ps); err != nil {
		t.Fatal(err)
	}
}

// TestCycleInInlineMetaBucket: the meta bucket is always small, so inline.
// Open reads it (loadFile's Get of the format) and must refuse the file
// with ErrCorrupt, not crash.
func TestCycleInInlineMetaBucket(t *testing.T) {
	if !runChild(t, 60*time.Second) {
		return
	}
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000) // a blocks bucket of many pages; meta still inline
	damageInlineBucket(t, path, layout.BucketMeta)
	openWantCorrupt(t, path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1})
}

// TestCycleInInlineBlocksBucket: a small file's blocks bucket is inline.
// Hits made before the audit's rebuild has replaced the file (held here by
// the hook) must fail with ErrCorrupt, not crash.
func TestCycleInInlineBlocksBucket(t *testing.T) {
	if !runChild(t, 60*time.Second) {
		return
	}
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 1)
	damageInlineBucket(t, path, layout.BucketBlocks)
	release := make(chan struct{})
	testRebuildHook = func() error { <-release; return nil }
	defer func() { testRebuildHook = nil }()
	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1})
	if err != nil {
		close(release)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want ErrCorrupt", err)
		}
		return
	}
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Hour)
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	if _, err := w.Inc(context.Background(), "audit-key-0000", 1); !errors.Is(err, ErrCorrupt) {
		close(release)
		t.Fatalf("Inc before the rebuild = %v, want ErrCorrupt", err)
	}
	close(release)
	if err := db.Snapshot(); err != nil { // waits for the audit's rebuild
		t.Fatal(err)
	}
	if _, err := w.Inc(context.Background(), "audit-key-0000", 1); err != nil {
		t.Fatalf("Inc after the rebuild = %v", err)
	}
}

// openWantCorrupt opens path and fails unless Open returns ErrCorrupt.
func openWantCorrupt(t *testing.T, path string, opts *Options) {
	t.Helper()
	db, err := Open(path, opts)
	if err == nil {
		db.Close()
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
}

// TestMoveAsideAfterDamagedBlocksTree: a file whose blocks tree is damaged
// and whose meta bucket is bad too. Open's first attempt finds the damaged
// tree (look-ups would fail until a rebuild) and then the bad metadata, so
// CorruptMoveAside moves the file aside and starts empty. The empty file
// has no damaged tree: look-ups in it must work, not fail with ErrCorrupt
// for ever (nothing rebuilds a sound file).
func TestMoveAsideAfterDamagedBlocksTree(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(layout.BucketMeta).Put(layout.KeyCount, []byte{0x80, 0, 0, 0, 0, 0, 0, 1}) // negative
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	id, count, ps := branchOf(t, path, string(layout.BucketBlocks))
	pointChildAt(t, path, ps, id, count/2, id)

	db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1,
		OnCorrupt: CorruptMoveAside, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := w.Inc(ctx, "audit-key-0001", 1); err != nil {
		t.Fatalf("Inc on the fresh file that replaced the damaged one = %v, want nil", err)
	}
	if err := db.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Get(ctx, "audit-key-0002"); err != nil || n != 0 {
		t.Fatalf("Get of a key never counted = %d, %v; want 0, nil", n, err)
	}
}
