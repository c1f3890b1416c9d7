package ratedb

import (
	"bytes"
	"fmt"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// Verify reads the whole file and checks it: that keys are in order, every
// window record's version and checksum, and that the expiry index and the
// records agree. It returns nil
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
	if db.bolt == nil {
		return nil
	}
	// bbolt's own tx.Check is not used: it walks the pages on a goroutine
	// of its own, where a damaged page's panic or fault cannot be caught.
	var order, records, index int
	err := db.view(func(tx *bolt.Tx) error {
		wb, xb := tx.Bucket(bucketWindows), tx.Bucket(bucketIndex)
		if wb == nil || xb == nil {
			return fmt.Errorf("%w: missing bucket", ErrCorrupt)
		}
		var buf [record.MaxTiers]counter
		var ik, prev []byte
		// Keys are in order, and every record decodes and has its index
		// entry.
		err := wb.ForEach(func(k, v []byte) error {
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
	if order+records+index > 0 {
		return fmt.Errorf("%w: %d keys out of order, %d damaged records, %d index entries without a matching record or records without one",
			ErrCorrupt, order, records, index)
	}
	return nil
}
