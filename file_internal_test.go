package ratedb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	m0, ok0 := readMeta(f, 0)
	m1, ok1 := readMeta(f, int64(m0.pageSize))
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
