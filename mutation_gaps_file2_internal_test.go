package ratedb

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/ratedb/ratedb/internal/siphash"
	bolt "go.etcd.io/bbolt"
)

// More tests for gaps that mutation testing of the file safety code (the
// page audit, rebuild and Verify) found: each fails with the deliberate bug
// it names.

// TestGapCheckPageRefusesEmptyBranch: a branch page with no elements leads
// nowhere (bbolt never writes one; a look-up in it reads an element that
// is not there), so the audit counts it as damaged; an empty leaf is a
// sound empty bucket, and a branch of one element is sound. (Mutant:
// checkPage accepted a branch page whose count is 0.)
func TestGapCheckPageRefusesEmptyBranch(t *testing.T) {
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

// storedBlock is one block of a file: its bbolt key and its windows.
type storedBlock struct {
	key     []byte
	windows []record.BlockWindow
}

// rewriteBlocks opens the closed file at path with bbolt and replaces its
// blocks with what edit makes of them (given in file order, with the
// file's secret): every block it returns is stored with a valid checksum,
// through bbolt, so the pages stay sound and only Verify's checks of the
// blocks' order can see the damage.
func rewriteBlocks(t *testing.T, path string, edit func(secret siphash.Key, blocks []storedBlock) []storedBlock) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.Update(func(tx *bolt.Tx) error {
		secret, err := layout.Secret(tx.Bucket(layout.BucketMeta))
		if err != nil {
			return err
		}
		bb := tx.Bucket(layout.BucketBlocks)
		var blocks []storedBlock
		var blk record.Block
		if err := bb.ForEach(func(k, v []byte) error {
			if err := record.DecodeBlock(&blk, k, v); err != nil {
				return err
			}
			sb := storedBlock{key: bytes.Clone(k)}
			for _, w := range blk.Windows {
				sb.windows = append(sb.windows, record.BlockWindow{Key: bytes.Clone(w.Key), Counters: append([]record.Counter(nil), w.Counters...)})
			}
			blocks = append(blocks, sb)
			return nil
		}); err != nil {
			return err
		}
		for _, b := range blocks {
			if err := bb.Delete(b.key); err != nil {
				return err
			}
		}
		for _, b := range edit(secret, blocks) {
			if err := bb.Put(b.key, record.AppendBlock(nil, b.key, b.windows)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// verifyOutOfOrder opens the file at path and checks that Verify reports
// exactly one block or window out of order, and nothing else.
func verifyOutOfOrder(t *testing.T, path string, now time.Time) {
	t.Helper()
	db, _ := openWindow(t, path, now)
	defer db.Close()
	err := db.Verify()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify = %v, want ErrCorrupt", err)
	}
	if want := ": 0 damaged pages, 1 blocks or windows out of order, 0 damaged blocks"; !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("Verify = %v, want it to end with %q", err, want)
	}
}

// TestGapVerifyBlockKeyEqualToPreviousWindow: a block's key must be above
// the hash of every window before it. A block keyed exactly at the hash of
// the previous block's last window takes that window's look-ups (a
// look-up goes to the last block whose key is at most its hash), where the
// window is not: it reads as fresh, a lost window. Verify must report it.
// (Mutant: prevH > KeyH(k) in Verify accepted the equal key.)
func TestGapVerifyBlockKeyEqualToPreviousWindow(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	db, _ := openWindow(t, path, now)
	if err := db.Verify(); err != nil {
		t.Fatalf("sound file: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rewriteBlocks(t, path, func(secret siphash.Key, blocks []storedBlock) []storedBlock {
		// A block whose last window's hash is above its key (else the
		// next block's new key would equal this block's key, damage of
		// another kind), followed by another block.
		for i := 0; i+1 < len(blocks); i++ {
			ws := blocks[i].windows
			h := layout.Hash(secret, ws[len(ws)-1].Key)
			if layout.KeyH(blocks[i].key) >= h {
				continue
			}
			if first := layout.Hash(secret, blocks[i+1].windows[0].Key); first <= h {
				t.Fatalf("the sound file's windows are out of order at block %d", i+1)
			}
			k := layout.BlockKey(h)
			blocks[i+1].key = k[:]
			return blocks
		}
		t.Fatal("no block with a window above its key")
		return nil
	})
	verifyOutOfOrder(t, path, now)
}

// TestGapVerifyRepeatedWindow: each window is in the file once. A copy of
// one, right after it in its block (a sound checksum: written so by a bug,
// not by damage), must be reported by Verify. (Mutant: bytes.Compare(prevWin,
// w.Key) > 0 in Verify accepted a key equal to the one before it.)
func TestGapVerifyRepeatedWindow(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	fillFile(t, path, now, 2000)
	rewriteBlocks(t, path, func(_ siphash.Key, blocks []storedBlock) []storedBlock {
		b := &blocks[len(blocks)/2]
		w := b.windows[0]
		b.windows = append([]record.BlockWindow{w}, b.windows...)
		return blocks
	})
	verifyOutOfOrder(t, path, now)
}

// TestGapRebuildCountsDamagedBlocks: a rebuild leaves out every block that
// fails its checksum, and those windows are lost; Stats.CorruptSkipped
// must count such blocks as well as the damaged pages that made the
// rebuild run. (Mutant: rebuild added only the damaged pages to the
// count, and every rebuild test's blocks were sound.)
func TestGapRebuildCountsDamagedBlocks(t *testing.T) {
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
