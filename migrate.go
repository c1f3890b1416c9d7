package ratedb

import (
	"bytes"
	"fmt"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// Before issue 9, a Layered limiter's records were keyed by its scales in
// the order its tiers were given, so (1m, 1h) and (1h, 1m) counted apart.
// They are now keyed by the sorted scales. migrateLegacy moves the records a
// file holds under an older order's prefix to the spec's prefix, once per
// process and order, the first time a Layered limiter is asked for in that
// order: the file format is otherwise unchanged.

// migrateBatch bounds the records one migration transaction moves.
const migrateBatch = 10_000

// migrateLegacy moves every record under the legacy prefix old (tiers in a
// given order; pos[i] is the spec's tier that holds given tier i) to s's
// prefix, with the counters in the spec's order. A key that already has a
// record under s's prefix, or an entry in memory, keeps that one: the legacy
// record is dropped.
func (db *DB) migrateLegacy(s *spec, old []byte, pos []int) error {
	if !db.persist {
		return nil
	}
	db.specMu.Lock()
	done := s.migrated[string(old)]
	db.specMu.Unlock()
	if done {
		return nil
	}
	db.snapMu.Lock()
	defer db.snapMu.Unlock()
	if db.fileErr != nil {
		return nil // the file is not written to at all; see auditFile
	}
	for {
		more, err := db.migrateSome(s, old, pos)
		if err != nil {
			return fmt.Errorf("ratedb: moving Layered records to the sorted tier order: %w", err)
		}
		if !more {
			break
		}
	}
	db.specMu.Lock()
	if s.migrated == nil {
		s.migrated = make(map[string]bool)
	}
	s.migrated[string(old)] = true
	db.specMu.Unlock()
	return nil
}

// migrateSome moves up to migrateBatch legacy records in one transaction
// and reports whether more remain. snapMu held.
func (db *DB) migrateSome(s *spec, old []byte, pos []int) (more bool, err error) {
	n := len(pos)
	var delta int64
	err = db.update(func(tx *bolt.Tx) error {
		delta = 0
		wb, xb, mb := tx.Bucket(bucketWindows), tx.Bucket(bucketIndex), tx.Bucket(bucketMeta)
		if wb == nil || xb == nil || mb == nil {
			return fmt.Errorf("%w: missing bucket", ErrCorrupt)
		}
		type rec struct{ k, v []byte }
		var recs []rec
		c := wb.Cursor()
		for k, v := c.Seek(old); k != nil && bytes.HasPrefix(k, old); k, v = c.Next() {
			if len(recs) == migrateBatch {
				more = true
				break
			}
			recs = append(recs, rec{bytes.Clone(k), bytes.Clone(v)})
		}
		var buf, out [maxTiersInline]counter
		for _, r := range recs {
			key := string(r.k[len(old):])
			cs, derr := record.Decode(buf[:0], r.k, r.v, n)
			if err := wb.Delete(r.k); err != nil {
				return err
			}
			delta--
			if derr != nil {
				db.stats.corrupt.Add(1)
				continue
			}
			if err := xb.Delete(record.AppendIndexKey(nil, record.MaxEnd(cs), r.k)); err != nil {
				return err
			}
			nk := append(append([]byte(nil), s.prefix...), key...)
			if wb.Get(nk) != nil || db.inMemoryOf(s, key) {
				continue
			}
			moved := out[:n]
			for i, c := range cs {
				moved[pos[i]] = c
			}
			if err := wb.Put(nk, record.AppendValue(nil, nk, moved)); err != nil {
				return err
			}
			if err := xb.Put(record.AppendIndexKey(nil, record.MaxEnd(moved), nk), nil); err != nil {
				return err
			}
			delta++
		}
		if delta == 0 {
			return nil
		}
		return mb.Put(keyWindows, record.EncodeInt64(db.stats.diskWindows.Load()+delta))
	})
	if err != nil {
		return false, err
	}
	db.stats.diskWindows.Add(delta)
	return more, nil
}

// inMemoryOf reports whether key of spec s has an entry in memory.
func (db *DB) inMemoryOf(s *spec, key string) bool {
	h := s.hash(key)
	sh := db.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.find(h, s, key) != nil
}
