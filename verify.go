package ratedb

import (
	"bytes"
	"fmt"
	"os"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// Verify reads the whole file and checks it: the structure of every page
// (see the audit after Open, in Options.OnCorrupt), that keys are in order,
// every window record's version and checksum, and that the expiry index and
// the records agree. It returns nil
// for a sound file, or an error wrapping ErrCorrupt that counts the problems
// of each kind (never naming a key).
//
// Open checks only what it must to open safely, and reads records as they are
// used, skipping and counting a damaged one. But bbolt checksums only its meta
// pages: a flipped byte in a stored key or in a branch page can make windows
// unreachable without any error, and their keys simply start fresh windows.
// Verify finds such damage. It costs a full read of the file in one read
// transaction (hits and snapshots go on meanwhile): run it at startup or from
// a maintenance job, not per request. It changes nothing. In memory-only mode
// it returns nil.
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
	var order, records, index, pages int
	err := db.view(func(tx *bolt.Tx) error {
		wb, xb := tx.Bucket(bucketWindows), tx.Bucket(bucketIndex)
		if wb == nil || xb == nil {
			return fmt.Errorf("%w: missing bucket", ErrCorrupt)
		}
		// The pages: the transaction keeps every page it can reach from
		// being reused, so they read the same through a file of our own.
		var err error
		if pages, err = db.auditTx(tx); err != nil || pages > 0 {
			return err // bbolt's reads of a damaged page can fault
		}
		var buf [record.MaxTiers]counter
		var ik, prev []byte
		// Keys are in order, and every record decodes and has its index
		// entry.
		err = wb.ForEach(func(k, v []byte) error {
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				order++
			}
			prev = append(prev[:0], k...)
			cs, err := record.Decode(buf[:0], k, v, record.AnyTiers)
			if err != nil {
				records++
				return nil
			}
			ik = record.AppendIndexKey(ik[:0], record.MaxEnd(cs), k)
			if xb.Get(ik) == nil {
				index++
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Index keys are in order, and every index entry has its record,
		// with that end.
		prev = nil
		return xb.ForEach(func(k, _ []byte) error {
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				order++
			}
			prev = append(prev[:0], k...)
			end, rk, ok := record.ParseIndexKey(k)
			if !ok {
				index++
				return nil
			}
			v := wb.Get(rk)
			if v == nil {
				index++
				return nil
			}
			if cs, err := record.Decode(buf[:0], rk, v, record.AnyTiers); err == nil && record.MaxEnd(cs) != end {
				index++
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if pages+order+records+index > 0 {
		return fmt.Errorf("%w: %d damaged pages, %d keys out of order, %d damaged records, %d index entries without a matching record or records without one",
			ErrCorrupt, pages, order, records, index)
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
	for _, name := range [][]byte{bucketMeta, bucketWindows, bucketIndex} {
		b := tx.Bucket(name)
		if b == nil {
			return 0, fmt.Errorf("%w: missing bucket", ErrCorrupt)
		}
		if root := uint64(b.Root()); root != 0 {
			roots = append(roots, pageRef{root, string(name)})
		}
	}
	a.walk(roots, 1)
	return a.damaged, a.err
}
