package ratedb

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/limits"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/ratedb/ratedb/internal/siphash"
	bolt "go.etcd.io/bbolt"
)

// migrateV1 turns a file of format ratedb/1 (one bbolt element per window
// and an expiry index, see internal/layout's legacy.go) into format
// ratedb/2, in one transaction: a crash leaves either file whole. Every
// sound window is written into blocks; a damaged one (a record that fails
// to decode, or a legacy Layered record whose counters do not match its
// key's scales) is counted in Stats.CorruptSkipped and dropped. It runs in Open, before anything else
// uses the file. A file without the windows bucket, or with a blocks
// bucket, is ErrCorrupt; one without its expiry index migrates.
//
// Before issue 9, a Layered limiter's records were keyed by its scales in
// the order its tiers were given, so (1m, 1h) and (1h, 1m) counted apart;
// they are now keyed by the sorted scales. The migration moves such legacy
// records to the sorted key, counters reordered; a key that also has a
// record under the sorted key keeps that one.
func (db *DB) migrateV1() error {
	var windows, damaged int
	err := db.update(func(tx *bolt.Tx) error {
		windows, damaged = 0, 0
		// A file marked ratedb/1 without its windows bucket, or with a
		// blocks bucket too, is damaged or was written by something
		// else: not a file to migrate. (Its expiry index, which the
		// migration drops, may be missing.)
		if tx.Bucket(layout.LegacyBucketWindows) == nil || tx.Bucket(layout.BucketBlocks) != nil {
			return fmt.Errorf("%w: a file marked ratedb/1 without its windows bucket, or with a blocks bucket", ErrCorrupt)
		}
		var (
			set     changeSet
			legacy  []bool
			moved   [record.MaxTiers]counter
			secret  = layout.NewSecret()
			hashKey = siphash.KeyFrom(secret)
		)
		err := layout.ForEach(tx, layout.Visitor{
			Window: func(k []byte, wcs []record.Counter) error {
				nk, old := k, false
				if given, ok := legacyOrder(k); ok {
					if len(wcs) != len(given) {
						// A sound checksum over counters its key's
						// scales do not match (one per scale): a
						// crafted or damaged record, dropped and
						// counted like one that fails its checksum.
						// (Reordering it would index past the scales.)
						damaged++
						return nil
					}
					pos, sorted := limits.SortScales(given)
					p := specPrefix(Algorithm(k[0]&^0x80), sorted, true)
					nk = append(p, k[len(p):]...)
					for i, c := range wcs {
						moved[pos[i]] = c
					}
					wcs, old = moved[:len(wcs)], true
				}
				set.add(hashKey, nk, "", wcs)
				legacy = append(legacy, old)
				return nil
			},
			Damaged: func(error) error { damaged++; return nil },
		})
		if err != nil {
			return err
		}
		// A legacy record whose sorted key also has a record gives way.
		recs := set.changes
		idx := make([]int, len(recs))
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int {
			if c := set.compare(&recs[a], &recs[b]); c != 0 {
				return c
			}
			return cmpBool(legacy[a], legacy[b])
		})
		sorted := make([]change, 0, len(recs))
		for _, i := range idx {
			if n := len(sorted); n > 0 && set.compare(&sorted[n-1], &recs[i]) == 0 {
				continue
			}
			sorted = append(sorted, recs[i])
		}
		windows = len(sorted)

		for _, b := range [][]byte{layout.LegacyBucketWindows, layout.LegacyBucketIndex} {
			if tx.Bucket(b) == nil {
				continue
			}
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		if _, err := tx.CreateBucket(layout.BucketBlocks); err != nil {
			return err
		}
		mb := tx.Bucket(layout.BucketMeta)
		for _, k := range [][]byte{layout.LegacyKeyWindows, layout.LegacyKeyHWM} {
			if err := mb.Delete(k); err != nil {
				return err
			}
		}
		if err := mb.Put(layout.KeySecret, secret); err != nil {
			return err
		}
		var sl slab
		w, err := newBlockWriter(tx, hashKey, nil, &sl)
		if err != nil {
			return err
		}
		if _, err := w.write(&set, sorted, math.MaxInt64); err != nil {
			return err
		}
		if err := putCount(tx, w.delta); err != nil {
			return err
		}
		return mb.Put(layout.KeyFormat, layout.Format)
	})
	if err != nil {
		return fmt.Errorf("ratedb: migrating the file from format ratedb/1: %w", err)
	}
	db.stats.corrupt.Add(int64(damaged))
	db.log.Info("ratedb: migrated the file to format ratedb/2", "path", db.path, "windows", windows, "damaged_records", damaged)
	return nil
}

// legacyOrder returns the scales of the record key k if it is a Layered
// limiter's key whose scales are not in ascending order (written before
// issue 9).
func legacyOrder(k []byte) ([]int64, bool) {
	if len(k) < 2 || k[0]&0x80 == 0 {
		return nil, false
	}
	n := int(k[1])
	if n < 2 || len(k) < 2+8*n {
		return nil, false
	}
	scales := make([]int64, n)
	for i := range scales {
		scales[i] = int64(binary.BigEndian.Uint64(k[2+8*i:]))
	}
	if slices.IsSorted(scales) {
		return nil, false
	}
	return scales, true
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
