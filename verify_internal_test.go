package ratedb

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/ratedb/ratedb/internal/siphash"
	bolt "go.etcd.io/bbolt"
)

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

// TestVerifyBlockKeyEqualToPreviousWindow: a block's key must be above
// the hash of every window before it. A block keyed exactly at the hash of
// the previous block's last window takes that window's look-ups (a
// look-up goes to the last block whose key is at most its hash), where the
// window is not: it reads as fresh, a lost window. Verify must report it.
// (Mutant: prevH > KeyH(k) in Verify accepted the equal key.)
func TestVerifyBlockKeyEqualToPreviousWindow(t *testing.T) {
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

// TestVerifyRepeatedWindow: each window is in the file once. A copy of
// one, right after it in its block (a sound checksum: written so by a bug,
// not by damage), must be reported by Verify. (Mutant: bytes.Compare(prevWin,
// w.Key) > 0 in Verify accepted a key equal to the one before it.)
func TestVerifyRepeatedWindow(t *testing.T) {
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
