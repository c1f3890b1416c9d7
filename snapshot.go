package ratedb

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// Snapshot writes every window changed since the last snapshot to the file,
// in one transaction, and returns when it has committed. It costs in
// proportion to the windows changed, not to the windows held. Hits are never
// blocked by its disk I/O: a window changed while the write is under way is
// simply written by the next snapshot.
//
// A crash loses at most the hits admitted since the last committed snapshot
// began. In memory-only mode Snapshot does nothing and returns nil.
func (db *DB) Snapshot() error {
	if !db.enter(0) {
		return ErrClosed
	}
	defer db.exit(0)
	return db.snapshot()
}

func (db *DB) backgroundSnapshot() {
	if !db.enter(0) {
		return
	}
	defer db.exit(0)
	if err := db.snapshot(); err != nil {
		db.log.Error("ratedb: snapshot failed; changed windows stay in memory and are retried", "err", err)
	}
}

// snapRec is one window copied for a snapshot: its record key and value live
// in the snapshot's slab, never reused within the transaction.
type snapRec struct {
	e         *entry
	off, klen int // key at slab[off:off+klen]
	vlen      int // value follows the key
	end       int64
	tiers     int
	tombstone bool
}

// snapshot copies the dirty windows, writes them sorted by key in one bbolt
// transaction, and settles the entries: on success cold entries leave memory,
// on failure every copied entry is dirty again.
func (db *DB) snapshot() error {
	if db.bolt == nil {
		return nil
	}
	db.snapMu.Lock()
	defer db.snapMu.Unlock()
	started := time.Now()

	var (
		recs []snapRec
		slab []byte
		buf  [maxTiersInline]counter
	)
	for i := range db.shards {
		sh := &db.shards[i]
		sh.dmu.Lock()
		list := sh.dirty
		sh.dirty = nil
		sh.dmu.Unlock()
		for _, e := range list {
			e.mu.Lock()
			if !e.gone && e.dirty {
				e.dirty = false
				e.inflight = true
				off := len(slab)
				slab = append(slab, e.s.prefix...)
				slab = append(slab, e.key...)
				klen := len(slab) - off
				r := snapRec{e: e, off: off, klen: klen, end: e.maxEnd(), tiers: e.tiers(), tombstone: e.tombstone()}
				if !r.tombstone {
					slab = record.AppendValue(slab, slab[off:off+klen], e.counters(buf[:0]))
					r.vlen = len(slab) - off - klen
				}
				recs = append(recs, r)
			}
			e.mu.Unlock()
		}
	}
	if len(recs) == 0 {
		return nil
	}
	key := func(r *snapRec) []byte { return slab[r.off : r.off+r.klen] }
	slices.SortFunc(recs, func(a, b snapRec) int { return bytes.Compare(key(&a), key(&b)) })

	var (
		delta   int64
		written int64
		hwm     = db.hwm.Load()
	)
	err := db.update(func(tx *bolt.Tx) error {
		wb, xb, mb := tx.Bucket(bucketWindows), tx.Bucket(bucketIndex), tx.Bucket(bucketMeta)
		if wb == nil || xb == nil || mb == nil {
			return fmt.Errorf("%w: missing bucket", ErrCorrupt)
		}
		// Index keys for Put get their own slab: bbolt keeps every slice
		// passed to Put until the transaction ends.
		var isize int
		for i := range recs {
			isize += record.IndexKeyLen(recs[i].klen)
		}
		islab := make([]byte, 0, isize)
		var scratch []byte
		for i := range recs {
			r := &recs[i]
			k := key(r)
			oldEnd, hadOld := int64(0), false
			if old := wb.Get(k); old != nil {
				hadOld = true
				if cs, err := record.Decode(buf[:0], k, old, r.tiers); err == nil {
					oldEnd = record.MaxEnd(cs)
					if r.tombstone || oldEnd != r.end {
						scratch = record.AppendIndexKey(scratch[:0], oldEnd, k)
						if err := xb.Delete(scratch); err != nil {
							return err
						}
					}
				} else {
					// The old record is damaged; it is replaced below. Its
					// index entry, if any, is dropped by the janitor.
					db.stats.corrupt.Add(1)
				}
			}
			if r.tombstone {
				if hadOld {
					if err := wb.Delete(k); err != nil {
						return err
					}
					delta--
				}
				written++
				continue
			}
			if !hadOld {
				delta++
			}
			v := slab[r.off+r.klen : r.off+r.klen+r.vlen]
			if err := wb.Put(k, v); err != nil {
				return err
			}
			if !hadOld || oldEnd != r.end {
				start := len(islab)
				islab = record.AppendIndexKey(islab, r.end, k)
				if err := xb.Put(islab[start:], nil); err != nil {
					return err
				}
			}
			written++
		}
		if err := mb.Put(keyHWM, record.EncodeInt64(hwm)); err != nil {
			return err
		}
		return mb.Put(keyWindows, record.EncodeInt64(db.stats.diskWindows.Load()+delta))
	})

	if err != nil {
		for i := range recs {
			e := recs[i].e
			e.mu.Lock()
			e.inflight = false
			if !e.gone && !e.dirty {
				db.markDirty(e, e.s.hash(e.key))
			}
			e.mu.Unlock()
		}
		db.stats.snapshotFailures.Add(1)
		db.stats.lastSnapErr.Store(&err)
		return err
	}
	db.stats.diskWindows.Add(delta)
	db.stats.snapshots.Add(1)
	db.stats.lastSnapDur.Store(int64(time.Since(started)))
	db.stats.lastSnapN.Store(written)
	db.stats.lastSnapB.Store(int64(len(slab)))
	db.stats.lastSnapErr.Store(nil)
	for i := range recs {
		e := recs[i].e
		e.mu.Lock()
		e.inflight = false
		drop := !e.gone && !e.dirty && !e.hot.Load()
		e.mu.Unlock()
		if drop {
			db.dropIfClean(e)
		}
	}
	return nil
}
