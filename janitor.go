package ratedb

import (
	"bytes"
	"math"
	"slices"
	"sync"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// The janitor removes expired windows: a window is removed by the first pass
// at or after its end plus Options.KeyOlderThan. It never scans every key. In
// memory, each entry sits in one slot of an expiry index (slots of
// expiryGranularity, keyed by the time the entry should next be looked at);
// a pass visits only the slots that are due and files an entry that is still
// live again under its new end. In the file, an index bucket keyed by end
// time lists every record, so a pass reads only the expired prefix.

// expiryGranularity is the width of an expiry-index slot, in milliseconds.
const expiryGranularity = 1000

// noSlot marks an entry that is not in the expiry index.
const noSlot = math.MinInt64

// cleanBatch bounds the records one janitor transaction deletes.
const cleanBatch = 100_000

// expiryIndex files entries by the time they should next be checked.
type expiryIndex struct {
	mu    sync.Mutex
	slots map[int64]*entry // slot -> head of a doubly linked list
	next  int64            // every slot below next has been processed
}

func (x *expiryIndex) init() {
	x.slots = make(map[int64]*entry)
	x.next = noSlot
}

// add files e to be checked at time at (Unix ms), moving it if it is
// filed already.
func (x *expiryIndex) add(e *entry, at int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unfile(e)
	slot := max(floorDiv(at, expiryGranularity), x.next)
	head := x.slots[slot]
	e.expSlot, e.expPrev, e.expNext = slot, nil, head
	if head != nil {
		head.expPrev = e
	}
	x.slots[slot] = e
}

// remove unfiles e if it is filed.
func (x *expiryIndex) remove(e *entry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unfile(e)
}

// unfile unfiles e if it is filed. x.mu held.
func (x *expiryIndex) unfile(e *entry) {
	if e.expSlot == noSlot {
		return
	}
	if e.expPrev != nil {
		e.expPrev.expNext = e.expNext
	} else if e.expNext != nil {
		x.slots[e.expSlot] = e.expNext
	} else {
		delete(x.slots, e.expSlot)
	}
	if e.expNext != nil {
		e.expNext.expPrev = e.expPrev
	}
	e.expSlot, e.expPrev, e.expNext = noSlot, nil, nil
}

// popDue unfiles and returns every entry filed at or before now's slot.
// Entries filed again during the same pass are not returned by it.
func (x *expiryIndex) popDue(now int64) []*entry {
	x.mu.Lock()
	defer x.mu.Unlock()
	nowSlot := floorDiv(now, expiryGranularity)
	var out []*entry
	take := func(slot int64) {
		for e := x.slots[slot]; e != nil; {
			n := e.expNext
			e.expSlot, e.expPrev, e.expNext = noSlot, nil, nil
			out = append(out, e)
			e = n
		}
		delete(x.slots, slot)
	}
	if x.next == noSlot || nowSlot-x.next > int64(len(x.slots)) {
		for slot := range x.slots {
			if slot <= nowSlot {
				take(slot)
			}
		}
	} else {
		for slot := x.next; slot <= nowSlot; slot++ {
			if _, ok := x.slots[slot]; ok {
				take(slot)
			}
		}
	}
	// nowSlot itself is taken again by the next pass: entries filed in it
	// after this pass, or taken early and filed again, fall due within it.
	x.next = max(x.next, nowSlot)
	return out
}

// expiryAt is when an entry whose windows end at end should next be looked
// at: the first instant at which the janitor removes it, end plus
// KeyOlderThan. An entry with no window (end 0) is looked at after
// KeyOlderThan from now. Filing at the end rather than at max(end, now) keeps
// a pass that looks early from pushing the removal past its due time.
func (db *DB) expiryAt(end, now int64) int64 {
	if end == 0 {
		return now + db.kot
	}
	return end + db.kot
}

// Clean runs one janitor pass now and returns the number of expired windows
// it removed from memory and from the file (a window held in both counts
// once). The background janitor runs the same pass every
// Options.CleanPeriod.
func (db *DB) Clean() (removed int, err error) {
	if !db.enter(0) {
		return 0, ErrClosed
	}
	defer db.exit(0)
	return db.clean()
}

func (db *DB) backgroundClean() {
	if !db.enter(0) {
		return
	}
	defer db.exit(0)
	if _, err := db.clean(); err != nil {
		db.stats.janitorFailures.Add(1)
		db.log.Error("ratedb: janitor pass failed", "err", err)
	}
}

func (db *DB) clean() (int, error) {
	now, err := db.now()
	if err != nil {
		return 0, err
	}
	cutoff := now - db.kot
	var (
		removed int
		dels    []uint64
		keys    map[string]struct{} // record keys of windows removed from memory
	)
	if db.persist {
		keys = make(map[string]struct{})
	}
	for _, e := range db.exp.popDue(now) {
		h := e.s.hash(e.key)
		sh := db.shard(h)
		sh.mu.Lock()
		if e.gone {
			sh.mu.Unlock()
			continue
		}
		e.mu.Lock()
		end := e.maxEnd()
		// Kept while unsaved: a tombstone (the file must delete the key's
		// record first), an entry whose end was lowered (the file's record
		// may end later, and would bring the window back), and one a
		// snapshot is writing. The next pass after the snapshot removes them.
		keep := (end == 0 && (e.dirty || e.inflight)) || e.lowered() || e.inflight
		if end <= cutoff && !keep {
			if db.removeLocked(sh, h, e) {
				dels = append(dels, h)
			}
			if end != 0 {
				removed++
				if keys != nil {
					keys[string(e.s.prefix)+e.key] = struct{}{}
				}
			}
		} else {
			db.exp.add(e, db.expiryAt(end, now))
		}
		e.mu.Unlock()
		sh.mu.Unlock()
	}
	// The cache may still hold removed entries; see uncache.
	db.uncache(dels)
	if db.persist {
		var n int
		n, err = db.cleanFile(cutoff, keys)
		removed += n
	}
	db.stats.cleaned.Add(int64(removed))
	return removed, err
}

// cleanFile deletes the file's records whose every window ended at or before
// cutoff, reading only the expired prefix of the index. It returns how many
// it deleted that are not in skip (windows already counted as removed from
// memory).
func (db *DB) cleanFile(cutoff int64, skip map[string]struct{}) (int, error) {
	db.snapMu.Lock()
	defer db.snapMu.Unlock()
	removed := 0
	type item struct {
		ik, k   []byte
		end     int64
		counted bool // the window is in memory: the memory side counts its removal
	}
	for {
		more := false
		var delta int64
		n := 0
		err := db.update(func(tx *bolt.Tx) error {
			wb, xb, mb := tx.Bucket(bucketWindows), tx.Bucket(bucketIndex), tx.Bucket(bucketMeta)
			var items []item
			c := xb.Cursor()
			for ik, _ := c.First(); ik != nil; ik, _ = c.Next() {
				if len(items) == cleanBatch {
					more = true
					break
				}
				end, k, ok := record.ParseIndexKey(ik)
				if ok && end > cutoff {
					break
				}
				inMem, live := db.inMemory(k, cutoff)
				if ok && live {
					// The window moved on in memory; the next snapshot
					// rewrites the record and its index entry.
					continue
				}
				items = append(items, item{ik: bytes.Clone(ik), k: bytes.Clone(k), end: end, counted: inMem})
			}
			if len(items) == 0 {
				return nil
			}
			for _, it := range items {
				if err := xb.Delete(it.ik); err != nil {
					return err
				}
			}
			slices.SortFunc(items, func(a, b item) int { return bytes.Compare(a.k, b.k) })
			var buf [maxTiersInline]counter
			for _, it := range items {
				v := wb.Get(it.k)
				if v == nil {
					continue
				}
				cs, derr := record.Decode(buf[:0], it.k, v, record.AnyTiers)
				if derr == nil && record.MaxEnd(cs) != it.end {
					continue // the record moved on; a later index entry covers it
				}
				if derr != nil {
					db.stats.corrupt.Add(1)
				}
				if err := wb.Delete(it.k); err != nil {
					return err
				}
				delta--
				if _, seen := skip[string(it.k)]; !seen && !it.counted && derr == nil {
					n++
				}
			}
			return mb.Put(keyWindows, record.EncodeInt64(db.stats.diskWindows.Load()+delta))
		})
		if err != nil {
			return removed, err
		}
		db.stats.diskWindows.Add(delta)
		removed += n
		if !more {
			return removed, nil
		}
	}
}

// inMemory reports whether the window with record key k has an entry in
// memory, and whether that entry's windows end after cutoff (it is live).
func (db *DB) inMemory(k []byte, cutoff int64) (present, live bool) {
	if len(k) == 0 {
		return false, false
	}
	plen := 9
	if k[0]&0x80 != 0 {
		if len(k) < 2 {
			return false, false
		}
		plen = 2 + 8*int(k[1])
	}
	if len(k) < plen {
		return false, false
	}
	db.specMu.Lock()
	s := db.specs[string(k[:plen])]
	db.specMu.Unlock()
	if s == nil {
		return false, false
	}
	key := string(k[plen:])
	h := s.hash(key)
	sh := db.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.find(h, s, key)
	if e == nil {
		return false, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return true, e.maxEnd() > cutoff
}
