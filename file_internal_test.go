package ratedb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A damaged page id in the freelist made bbolt write a page at a negative
// offset on the next commit (found by the corruption trials, seed 20261122,
// trial 2722). Open must refuse such a file with ErrCorrupt.
func TestOpenRejectsBadFreelist(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1}
	path := filepath.Join(t.TempDir(), "rate.db")
	db, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := db.Window(FixedWindow, time.Hour)
	ctx := context.Background()
	for round := 0; round < 3; round++ { // rewrites free pages
		for i := 0; i < 2000; i++ {
			if _, err := w.Inc(ctx, fmt.Sprint("key-", i), 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, ok0, _ := readMeta(f, 0)
	m1, ok1, _ := readMeta(f, int64(m0.pageSize))
	f.Close()
	if !ok0 || !ok1 {
		t.Fatal("meta pages unreadable")
	}
	m := m0
	if m1.txid > m0.txid {
		m = m1
	}
	fl := int(m.freelist) * int(m.pageSize)
	if n := binary.LittleEndian.Uint16(data[fl+10:]); n == 0 || n == 0xFFFF {
		t.Fatalf("want a short non-empty freelist to damage, have count %d", n)
	}
	bad := append([]byte(nil), data...)
	binary.LittleEndian.PutUint64(bad[fl+pageHeader:], 1<<61) // a page far past the end
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, opts); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a damaged freelist = %v, want ErrCorrupt", err)
	}

	// The intact file still opens.
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, opts)
	if err != nil {
		t.Fatalf("intact file: %v", err)
	}
	db.Close()
}

// A damaged meta page is not silent: bbolt opens at the other meta page's
// commit, and Open counts the damage in Stats.CorruptSkipped (and logs it).
func TestOpenReportsDamagedMeta(t *testing.T) {
	for _, page := range []int{0, 1} {
		t.Run(fmt.Sprint("meta", page), func(t *testing.T) {
			now := time.UnixMilli(1_767_225_600_000)
			opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1}
			path := filepath.Join(t.TempDir(), "rate.db")
			db, err := Open(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := db.Window(FixedWindow, time.Hour)
			for i := 0; i < 100; i++ {
				if _, err := w.Inc(context.Background(), fmt.Sprint("key-", i), 1); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data[page*os.Getpagesize()+pageHeader] ^= 0x5a // the magic number (bbolt pages are OS pages)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err = Open(path, opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer db.Close()
			if got := db.Stats().CorruptSkipped; got != 1 {
				t.Fatalf("CorruptSkipped = %d, want 1", got)
			}
		})
	}
}

// Verify passes a sound file and finds damage that reads cannot see: a
// flipped byte in a stored key leaves a record no lookup reaches.
func TestVerify(t *testing.T) {
	mem, err := Open("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Verify(); err != nil {
		t.Fatalf("memory-only Verify = %v", err)
	}
	mem.Close()
	if err := mem.Verify(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Verify after Close = %v, want ErrClosed", err)
	}

	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1}
	path := filepath.Join(t.TempDir(), "rate.db")
	db, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := db.Window(PerKeyWindow, time.Minute)
	l, _ := db.Layered(FixedWindow, Tier{Scale: time.Minute, Limit: 5}, Tier{Scale: time.Hour, Limit: 50})
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		k := fmt.Sprintf("verify-key-%03d", i)
		if _, err := w.Inc(ctx, k, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Hit(ctx, k, 1); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			if err := db.Snapshot(); err != nil {
				t.Fatal(err)
			}
			now = now.Add(45 * time.Second) // windows roll over, the janitor has work
			if _, err := db.Clean(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("sound file: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Every copy of one key (its record, its index entry, stale copies in
	// free pages): the record now sits under a key it was not written for.
	key := []byte("verify-key-250")
	if bytes.Count(data, key) == 0 {
		t.Fatal("no stored key found")
	}
	data = bytes.ReplaceAll(data, key, []byte("verify-key-X50"))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	if err := db.Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify of a file with a damaged key = %v, want ErrCorrupt", err)
	}
}

// eioReader fails, with EIO, every read that covers byte at of the file;
// other reads go to r.
type eioReader struct {
	r  io.ReaderAt
	at int64
}

func (e eioReader) ReadAt(b []byte, off int64) (int, error) {
	if off <= e.at && e.at < off+int64(len(b)) {
		return 0, &fs.PathError{Op: "read", Path: "rate.db", Err: syscall.EIO}
	}
	return e.r.ReadAt(b, off)
}

// A read of the file that fails (EIO: a bad sector, a flaky network disk)
// says nothing about its bytes. Open returns the error, wrapped, not
// ErrCorrupt: with CorruptMoveAside the sound file stays where it is (it
// was moved aside and the DB started empty, every count lost), and once the
// read succeeds again the file opens with its counts.
func TestOpenReadErrorIsNotCorrupt(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1_767_225_600_000)
	opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1,
		OnCorrupt: CorruptMoveAside, Logger: slog.New(slog.DiscardHandler)}
	dir := t.TempDir()
	path := filepath.Join(dir, "rate.db")
	db, err := Open(path, opts)
	require.NoError(t, err)
	w, err := db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	for i := range 3000 { // more than one page of blocks: the root is a branch
		_, err := w.Inc(ctx, fmt.Sprint("key-", i), int64(1+i%7))
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	m, _, err := validateFile(path)
	require.NoError(t, err)
	require.NotEqual(t, ^uint64(0), m.freelist, "the file has a freelist page")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	ps := int64(m.pageSize)

	for _, tc := range []struct {
		name string
		at   int64
	}{
		{"first meta page", 0},
		{"second meta page", ps},
		{"root page", int64(m.root) * ps},
		{"freelist page", int64(m.freelist) * ps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testValidateReader = func(r io.ReaderAt) io.ReaderAt { return eioReader{r: r, at: tc.at} }
			db, err := Open(path, opts)
			testValidateReader = nil
			if err == nil {
				_ = db.Close()
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, syscall.EIO)
			assert.NotErrorIs(t, err, ErrCorrupt)
			got, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.True(t, bytes.Equal(data, got), "the file is unchanged, in its place")
			ents, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			assert.Len(t, ents, 1, "no file moved aside or created")
		})
	}

	db, err = Open(path, opts)
	require.NoError(t, err)
	defer db.Close()
	w, err = db.Window(FixedWindow, time.Hour)
	require.NoError(t, err)
	got, err := w.Get(ctx, "key-2999")
	require.NoError(t, err)
	assert.Equal(t, int64(1+2999%7), got)
	assert.Zero(t, db.Stats().CorruptSkipped)
}

// TestFileOnePageShort: a file that ends one page before the page count
// its meta page gives (truncated at a page boundary) is refused by Open
// with ErrCorrupt, and one that ends exactly there opens. Its last page is
// neither the root nor the freelist, whose reads would fail on their own.
// (Mutant: m.pgid > size/ps+1 in validateFile accepted the short file.)
func TestFileOnePageShort(t *testing.T) {
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

// TestFreelistValidRefusesRepeatedIDs: the freelist Open accepts lists
// each page once, in increasing order, between the meta pages and the
// page count, as bbolt writes it: a page listed twice is damage (bbolt's
// map freelist would count it free twice), and so is a meta page. (Mutant: id < prev instead of id <= prev in
// freelistValid accepted a repeated id, and no test repeated one;
// prev starting at 0 accepted page 1, a meta page.)
func TestFreelistValidRefusesRepeatedIDs(t *testing.T) {
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

// overflowPastTheEnd writes a sound file of a few hundred windows at path,
// then sets the overflow count of the page that pick chooses from its meta
// page (the root or the freelist) so that its last overflow page is the
// page count: one page past the file's last page. It returns the meta page.
func overflowPastTheEnd(t *testing.T, path string, pick func(bmeta) uint64) bmeta {
	t.Helper()
	fillFile(t, path, time.UnixMilli(1_767_225_600_000), 300)
	m, _, err := validateFile(path)
	require.NoError(t, err)
	id := pick(m)
	require.Less(t, id, m.pgid)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(m.pgid-id))
	_, err = f.WriteAt(hdr[:], int64(id)*int64(m.pageSize)+12)
	require.NoError(t, err)
	return m
}

// openRefused requires Open to refuse the file at path with ErrCorrupt.
func openRefused(t *testing.T, path, what string) {
	t.Helper()
	db, err := Open(path, &Options{SnapshotPeriod: -1, CleanPeriod: -1})
	if err == nil {
		db.Close()
	}
	require.ErrorIs(t, err, ErrCorrupt, "Open of a file whose %s", what)
}

// TestOpenRefusesRootOverflowPastTheFile: the root page's overflow
// pages must lie within the page count (bbolt frees them all when it
// rewrites the root, at the next commit): a root page whose last overflow
// page is the page count itself is refused by Open with ErrCorrupt.
// (Mutant: validateFile no longer checked m.root+overflow against m.pgid,
// or checked it with > instead of >=; the file then opened, and only the
// audit after Open found the damage.)
func TestOpenRefusesRootOverflowPastTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rate.db")
	overflowPastTheEnd(t, path, func(m bmeta) uint64 { return m.root })
	_, _, err := validateFile(path)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "bad root page")
	openRefused(t, path, "root page runs past its last page")
}

// TestOpenRefusesFreelistOverflowPastTheFile: the same bound on the
// freelist page's overflow pages. The file is longer than its page count
// (as a file bbolt grew ahead of its pages is), so that the freelist's
// ids, read over the claimed span, are all there and sound: only the bound
// refuses it. (Mutant: validateFile no longer checked
// m.freelist+overflow against m.pgid, or checked it with > instead of >=.)
func TestOpenRefusesFreelistOverflowPastTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rate.db")
	m := overflowPastTheEnd(t, path, func(m bmeta) uint64 {
		require.NotEqual(t, ^uint64(0), m.freelist, "ratedb writes a freelist")
		return m.freelist
	})
	ps := int64(m.pageSize)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	if need := (int64(m.pgid) + 1) * ps; fi.Size() < need {
		require.NoError(t, os.Truncate(path, need))
	}
	_, _, err = validateFile(path)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "bad freelist page")
	openRefused(t, path, "freelist page runs past its last page")
}
