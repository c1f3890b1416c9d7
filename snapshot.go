package ratedb

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// Snapshot writes every window changed since the last snapshot to the file,
// sorted by key, in transactions of at most 131,072 windows, and returns when
// all have committed. It costs in proportion to the windows changed, not to
// the windows held. Hits are never blocked by its disk I/O: a window changed
// while the write is under way is simply written by the next snapshot. (A
// call that would bring a window into a memory already holding MaxHotKeys +
// MaxSnapshotBacklog windows waits for a batch to commit, or runs a snapshot
// itself: see Options.MaxSnapshotBacklog.)
//
// A crash loses at most the hits admitted since the last completed snapshot
// began: every window in the file is at least as new as it was then. In
// memory-only mode Snapshot does nothing and returns nil.
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

// snapRec is one window copied for a snapshot. Its record key and value live
// in the snapshot's slab, never reused within the transaction. It is kept
// small (72 bytes) because a snapshot sorts a million of them by value.
type snapRec struct {
	e       *entry
	s       *spec
	kv      []byte // record key (spec prefix + key), then the value; no value for a tombstone
	k8      uint64 // the key's bytes 0-7, big endian, zero padded: a cheap first comparison
	k16     uint64 // the key's bytes 8-15, likewise: keys often share their first 8 bytes
	end     int64
	kn      int32 // length of the record key in kv
	lowered bool  // the entry's lowered bit, cleared by the copy: restored if the write fails
}

// key returns the record key.
func (r *snapRec) key() []byte { return r.kv[:r.kn:r.kn] }

// value returns the record value, nil for a tombstone.
func (r *snapRec) value() []byte {
	if r.tombstone() {
		return nil
	}
	return r.kv[r.kn:]
}

// tombstone reports whether the record deletes the key's window.
func (r *snapRec) tombstone() bool { return int(r.kn) == len(r.kv) }

// compareRecs orders records by record key, as bbolt stores them: by spec
// prefix, then key. k8 and k16 order keys by their first 16 bytes without
// touching the slab; only ties compare the bytes.
func compareRecs(a, b *snapRec) int {
	if a.s != b.s {
		return bytes.Compare(a.key(), b.key())
	}
	if a.k8 != b.k8 {
		return cmp.Compare(a.k8, b.k8)
	}
	if a.k16 != b.k16 {
		return cmp.Compare(a.k16, b.k16)
	}
	return bytes.Compare(a.key(), b.key())
}

// key8 returns the first 8 bytes of key, big endian, zero padded. If
// key8(a) < key8(b) then a < b.
func key8(key string) uint64 {
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// key16 returns bytes 8-15 of key, big endian, zero padded. If key8(a) ==
// key8(b) and key16(a) < key16(b) then a < b: the two compare the first 16
// bytes of the zero-padded keys, and a zero-padded key is smaller than or
// equal to every key it is a prefix of.
func key16(key string) uint64 {
	if len(key) <= 8 {
		return 0
	}
	return key8(key[8:])
}

// slabChunk is the size of one chunk of a snapshot's slab.
const slabChunk = 1 << 20

// slab hands out byte slices for the records of one snapshot. It grows by
// whole chunks and never moves or reuses bytes already handed out: bbolt
// keeps every slice passed to Put until its transaction ends.
type slab struct {
	buf   []byte
	total int
}

// alloc returns a fresh slice of n bytes.
func (sl *slab) alloc(n int) []byte {
	if cap(sl.buf)-len(sl.buf) < n {
		sl.buf = make([]byte, 0, max(n, slabChunk))
	}
	start := len(sl.buf)
	sl.buf = sl.buf[:start+n]
	sl.total += n
	return sl.buf[start : start+n : start+n]
}

// snapshot copies the dirty windows, writes them sorted by key in batches,
// and settles the entries: as its batch commits a cold entry leaves memory;
// on a failure every entry not yet committed is dirty again.
func (db *DB) snapshot() error {
	if !db.persist {
		return nil
	}
	db.snapMu.Lock()
	defer db.snapMu.Unlock()
	_, err := db.snapshotLocked()
	return err
}

// snapshotLocked is snapshot with snapMu held; it also returns how many
// records it wrote.
func (db *DB) snapshotLocked() (int64, error) {
	started := time.Now()
	// Waiters in relieve look again once this snapshot is over, whatever
	// its outcome.
	defer db.progress.signal()

	var (
		lists [numShards][]*entry
		n     int
		buf   [maxTiersInline]counter
		sl    slab
	)
	for i := range db.shards {
		sh := &db.shards[i]
		sh.dmu.Lock()
		lists[i] = sh.dirty
		sh.dirty = nil
		sh.dmu.Unlock()
		n += len(lists[i])
	}
	if n == 0 {
		return 0, nil
	}
	recs := make([]snapRec, 0, n)
	for _, list := range lists {
		for _, e := range list {
			e.mu.Lock()
			if !e.gone && e.dirty {
				e.dirty = false
				e.inflight = true
				lowered := e.lowered()
				e.setLowered(false) // the copy carries the lowered ends
				s := e.s
				klen := len(s.prefix) + len(e.key)
				r := snapRec{e: e, s: s, k8: key8(e.key), k16: key16(e.key), end: e.maxEnd(), kn: int32(klen), lowered: lowered}
				if e.tombstone() {
					r.kv = sl.alloc(klen)
				} else {
					r.kv = sl.alloc(klen + record.ValueLen(e.tiers()))
				}
				k := r.kv[:klen]
				copy(k[copy(k, s.prefix):], e.key)
				if !e.tombstone() {
					record.AppendValue(r.kv[klen:klen], k, e.counters(buf[:0]))
				}
				recs = append(recs, r)
			}
			e.mu.Unlock()
		}
	}
	// The queued entries are now either records of this snapshot (still
	// in the backlog until their batch commits) or skipped.
	db.stats.backlog.Add(int64(len(recs) - n))
	if len(recs) == 0 {
		return 0, nil
	}
	slices.SortFunc(recs, func(a, b snapRec) int { return compareRecs(&a, &b) })

	// Write in batches of sorted records, each its own transaction, so that
	// a large backlog does not build one huge transaction in memory; entries
	// leave memory as their batch commits. A failed batch leaves it and every
	// later one dirty. The crash bound holds per Snapshot call: every window
	// on disk is at least as new as when the last completed snapshot began.
	var written int64
	for len(recs) > 0 {
		batch := recs[:min(len(recs), snapshotBatch)]
		n, err := db.writeBatch(batch)
		if err != nil {
			// Every record not yet committed leaves the backlog and its
			// entry, if still in memory and clean, joins it again.
			db.stats.backlog.Add(-int64(len(recs)))
			for i := range recs {
				e := recs[i].e
				e.mu.Lock()
				e.inflight = false
				if recs[i].lowered {
					e.setLowered(true)
				}
				if !e.gone && !e.dirty {
					db.markDirty(e, e.s.hash(e.key))
				}
				e.mu.Unlock()
			}
			db.stats.snapshotFailures.Add(1)
			db.stats.lastSnapErr.Store(&err)
			return written, err
		}
		written += n
		db.stats.backlog.Add(-int64(len(batch)))
		for i := range batch {
			e := batch[i].e
			e.mu.Lock()
			e.inflight = false
			drop := !e.gone && !e.dirty && !e.hot.Load()
			e.mu.Unlock()
			if drop {
				db.dropIfClean(e)
			}
		}
		recs = recs[len(batch):]
		db.progress.signal()
	}
	db.stats.snapshots.Add(1)
	db.stats.lastSnapDur.Store(int64(time.Since(started)))
	db.stats.lastSnapN.Store(written)
	db.stats.lastSnapB.Store(int64(sl.total))
	db.stats.lastSnapErr.Store(nil)
	return written, nil
}

// snapshotBatch is the most windows one snapshot transaction writes (a
// variable only so that tests can make batches small).
var snapshotBatch = 1 << 17

// testBatchHook, when set by a test, runs inside each batch's transaction;
// an error it returns fails the batch.
var testBatchHook func() error

// writeBatch writes recs, sorted by key, in one transaction, and returns how
// many it wrote. It keeps the expiry index and the window count in step.
func (db *DB) writeBatch(recs []snapRec) (written int64, err error) {
	var (
		delta int64
		buf   [maxTiersInline]counter
	)
	err = db.update(func(tx *bolt.Tx) error {
		delta, written = 0, 0
		if testBatchHook != nil {
			if err := testBatchHook(); err != nil {
				return err
			}
		}
		wb, xb, mb := tx.Bucket(bucketWindows), tx.Bucket(bucketIndex), tx.Bucket(bucketMeta)
		if wb == nil || xb == nil || mb == nil {
			return fmt.Errorf("%w: missing bucket", ErrCorrupt)
		}
		// Index keys for Put get their own slab: bbolt keeps every slice
		// passed to Put until the transaction ends.
		var isize int
		for i := range recs {
			isize += record.IndexKeyLen(int(recs[i].kn))
		}
		islab := make([]byte, 0, isize)
		var scratch []byte
		// One cursor serves every look-up: Bucket.Get makes a new cursor,
		// and its search stack, on each call (several heap allocations per
		// window). Seek repositions from the root, so the Puts between look-ups
		// do not invalidate it.
		wc := wb.Cursor()
		for i := range recs {
			r := &recs[i]
			k := r.key()
			oldEnd, hadOld := int64(0), false
			if old := seekExact(wc, k); old != nil {
				hadOld = true
				if cs, err := record.Decode(buf[:0], k, old, len(r.s.scales)); err == nil {
					oldEnd = record.MaxEnd(cs)
					if r.tombstone() || oldEnd != r.end {
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
			if r.tombstone() {
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
			if err := wb.Put(k, r.value()); err != nil {
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
		return mb.Put(keyWindows, record.EncodeInt64(db.stats.diskWindows.Load()+delta))
	})

	if err != nil {
		return 0, err
	}
	db.stats.diskWindows.Add(delta)
	return written, nil
}

// seekExact returns the value stored under k, or nil if there is none (as
// Bucket.Get), reusing the cursor c of k's bucket.
func seekExact(c *bolt.Cursor, k []byte) []byte {
	ck, v := c.Seek(k)
	if ck == nil || !bytes.Equal(ck, k) {
		return nil
	}
	return v
}
