package ratedb

import (
	"bytes"
	"fmt"
	"os"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// Verify reads the whole file and checks it: the structure of every page
// (see the audit after Open, in Options.OnCorrupt), every block's version,
// structure and checksum, and that windows are in the file's order (each in
// the block its hash leads to). It returns nil for a sound file, or an error
// wrapping ErrCorrupt that counts the problems of each kind (never naming a
// key).
//
// Open checks only what it must to open safely, and reads blocks as they are
// used, skipping and counting a damaged one. But bbolt checksums only its meta
// pages: until the page audit after Open has run, a flipped byte in a branch
// page can send look-ups to the wrong page, where their keys read as fresh
// windows. Verify finds such damage at once. It costs a full read of the file in one read transaction (hits and
// snapshots go on meanwhile): run it at startup or from a maintenance job, not
// per request. It changes nothing. In memory-only mode it returns nil.
func (db *DB) Verify() error {
	if !db.enter(0) {
		return ErrClosed
	}
	defer db.exit(0)
	if !db.persist {
		return nil
	}
	// bbolt's own tx.Check is not used: it walks the pages on a goroutine
	// of its own, where a damaged page's panic or fault cannot be caught.
	var order, blocks, pages int
	err := db.view(func(tx *bolt.Tx) error {
		bb := tx.Bucket(layout.BucketBlocks)
		if bb == nil {
			return errMissingBucket
		}
		// The pages: the transaction keeps every page it can reach from
		// being reused, so they read the same through a file of our own.
		var err error
		if pages, err = db.auditTx(tx); err != nil || pages > 0 {
			return err // bbolt's reads of a damaged page can fault
		}
		secret, err := layout.Secret(tx.Bucket(layout.BucketMeta))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		var (
			blk     record.Block
			prevKey []byte
			prevWin []byte
			prevH   uint64
			anyPrev bool
		)
		return bb.ForEach(func(k, v []byte) error {
			// Block keys are 8 bytes, in order, and each is above the
			// hash of every window before it.
			if len(k) != 8 || (prevKey != nil && bytes.Compare(prevKey, k) >= 0) ||
				(anyPrev && prevH >= layout.KeyH(k)) {
				order++
			}
			prevKey = append(prevKey[:0], k...)
			if err := record.DecodeBlock(&blk, k, v); err != nil {
				blocks++
				return nil
			}
			// Its windows are in (hash, key) order, from its key on.
			for i, w := range blk.Windows {
				h := layout.Hash(secret, w.Key)
				switch {
				case i == 0 && h < layout.KeyH(k):
					order++
				case anyPrev && (h < prevH || h == prevH && bytes.Compare(prevWin, w.Key) >= 0):
					order++
				}
				prevH, anyPrev = h, true
				prevWin = append(prevWin[:0], w.Key...)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if pages+order+blocks > 0 {
		return fmt.Errorf("%w: %d damaged pages, %d blocks or windows out of order, %d damaged blocks",
			ErrCorrupt, pages, order, blocks)
	}
	return nil
}

// auditTx checks the structure of the pages of every bucket tx sees (see
// pageAudit); the root bucket's page, which holds the small buckets inline,
// was checked after Open. It returns how many pages are damaged.
func (db *DB) auditTx(tx *bolt.Tx) (int, error) {
	f, err := os.Open(db.path)
	if err != nil {
		return 0, fmt.Errorf("ratedb: %w", err)
	}
	defer f.Close()
	ps := db.bolt.Info().PageSize
	a := newPageAudit(f, bmeta{pageSize: uint32(ps), pgid: uint64(tx.Size()) / uint64(ps)})
	var roots []pageRef
	for _, name := range [][]byte{layout.BucketMeta, layout.BucketBlocks} {
		b := tx.Bucket(name)
		if b == nil {
			return 0, fmt.Errorf("%w: missing bucket", ErrCorrupt)
		}
		if root := uint64(b.Root()); root != 0 {
			roots = append(roots, pageRef{id: root, bucket: string(name)})
		}
	}
	a.walk(roots, 1)
	return a.damaged, a.err
}
