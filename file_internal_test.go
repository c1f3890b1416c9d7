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
