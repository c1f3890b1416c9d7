package ratedb

import (
	"sync"
	"sync/atomic"

	"github.com/ratedb/ratedb/internal/record"
)

// counter is one tier's state: Count hits in the window [End-scale, End).
// End == 0 means no window.
type counter = record.Counter

// entry is the in-memory state of one key of one Window or Layered limiter.
//
// Locking: a shard's mu guards membership (the shard map, next, hot writes);
// an entry's mu guards its counters and flags. The order is shard.mu, then
// entry.mu, then the leaf locks (shard.dmu, expiryIndex.mu); ristretto's
// callbacks take shard.mu, so no ristretto call that can block (Del, Wait) is
// ever made while holding shard.mu.
type entry struct {
	mu  sync.Mutex
	s   *spec
	key string

	next *entry  // hash-collision chain in the shard map (shard.mu)
	hot  hotWord // hot: a cache Set is outstanding or the cache holds the entry (written under shard.mu); and the entry's snapshot stamp (mu)

	gone  bool  // removed from the shard map; holders must look the key up again (written under shard.mu and mu)
	dirty bool  // changed since it was last copied by a snapshot (mu)
	bits  uint8 // usesMask: uses served by the fast table, to sample for the cache; loweredBit; hashRoomBit, hashKeptBit (mu)

	c    counter    // tier 0 (mu)
	more *[]counter // tiers 1.. of a Layered limiter, nil for a Window (mu); a pointer keeps Window entries small

	// expiry index membership (expiryIndex.mu)
	expSlot          int64
	expPrev, expNext *entry
}

// hotWord holds an entry's hot flag in its top bit, read and written
// atomically (Load, Store), and in its other 31 bits the number of the last
// snapshot that copied the entry, 0 if none (snap, setSnap: under the
// entry's mu; see inflight). One word keeps the entry at 96 bytes.
type hotWord struct{ v atomic.Uint32 }

const hotBit = 1 << 31

// Load reports whether the entry is hot.
func (w *hotWord) Load() bool { return w.v.Load()&hotBit != 0 }

// Store sets the hot flag on or off.
func (w *hotWord) Store(on bool) {
	if on {
		w.v.Or(hotBit)
	} else {
		w.v.And(^uint32(hotBit))
	}
}

// snap returns the snapshot stamp.
func (w *hotWord) snap() uint32 { return w.v.Load() &^ hotBit }

// setSnap sets the snapshot stamp to id (less than 1<<31), keeping the hot
// flag, which may change meanwhile.
func (w *hotWord) setSnap(id uint32) {
	for {
		old := w.v.Load()
		if w.v.CompareAndSwap(old, old&hotBit|id) {
			return
		}
	}
}

// The bits of entry.bits: a 4-bit use counter (the entry stays within its
// 96-byte size class), loweredBit, and the two bits of a kept file hash
// (see keepFileHash).
const (
	usesMask    = 0x0f
	loweredBit  = 0x10
	hashRoomBit = 0x20 // the allocation has room after the key for a file hash (set once by allocEntry)
	hashKeptBit = 0x40 // that room holds the file hash of the record key (mu)
)

// lowered reports whether an end was lowered since a snapshot last copied
// the entry: capped by the clock model (spec.capEnds) or cleared by Reset.
// The file's record may then end later than the entry, so the janitor must
// not let the entry leave memory before a snapshot has written it: a later
// load would bring the old window back. (Otherwise a window's end only
// grows: a new window opens only once the old one has ended.) e.mu held.
func (e *entry) lowered() bool { return e.bits&loweredBit != 0 }

// setLowered sets or clears loweredBit. e.mu held.
func (e *entry) setLowered(on bool) {
	if on {
		e.bits |= loweredBit
	} else {
		e.bits &^= loweredBit
	}
}

// tiers returns the number of counters the entry holds.
func (e *entry) tiers() int {
	if e.more == nil {
		return 1
	}
	return 1 + len(*e.more)
}

// tier returns counter i.
func (e *entry) tier(i int) *counter {
	if i == 0 {
		return &e.c
	}
	return &(*e.more)[i-1]
}

// counters appends a copy of every counter to dst.
func (e *entry) counters(dst []counter) []counter {
	dst = append(dst, e.c)
	if e.more == nil {
		return dst
	}
	return append(dst, *e.more...)
}

// setCounters overwrites the counters from cs (len(cs) == e.tiers()).
func (e *entry) setCounters(cs []counter) {
	e.c = cs[0]
	if e.more != nil {
		copy(*e.more, cs[1:])
	}
}

// maxEnd is the latest end among the tiers.
func (e *entry) maxEnd() int64 {
	m := e.c.End
	if e.more != nil {
		for _, c := range *e.more {
			m = max(m, c.End)
		}
	}
	return m
}

// tombstone reports whether the entry holds no window at all: it was reset.
// A dirty tombstone must reach the file (to delete the key's record) before
// the entry may leave memory.
func (e *entry) tombstone() bool { return e.maxEnd() == 0 }

const numShards = 256

// shard is one slice of the authoritative in-memory index. Every entry in
// memory, hot or cold, is in exactly one shard map; the cache only decides
// which entries stay in memory.
type shard struct {
	mu sync.Mutex
	m  map[uint64]*entry

	// uncaching counts, per hash, the entries removeLocked took out of
	// memory while the cache might hold them, until uncache has queued
	// their Del (mu). acquire offers no entry of such a hash meanwhile: see
	// uncache.
	uncaching map[uint64]int32

	dmu   sync.Mutex
	dirty []*entry // entries whose dirty flag went from false to true (dmu)

	// Calls on keys of this shard, counted as they enter and as they exit;
	// the difference is the calls in progress, which Close waits for. A Hit
	// exits through allowed or denied, so the decision counts of Stats cost
	// no extra atomic operation.
	entered atomic.Int64
	exited  atomic.Int64 // exits of calls that made no Hit decision
	allowed atomic.Int64 // exits of allowed Hits
	denied  atomic.Int64 // exits of denied Hits
	_       [64]byte
}

// find returns the entry for (s, key) with hash h, or nil. sh.mu held.
func (sh *shard) find(h uint64, s *spec, key string) *entry {
	for e := sh.m[h]; e != nil; e = e.next {
		if e.s == s && e.key == key {
			return e
		}
	}
	return nil
}

// insert adds e under hash h. sh.mu held.
func (sh *shard) insert(h uint64, e *entry) {
	e.next = sh.m[h]
	sh.m[h] = e
}

// remove unlinks e (stored under h). sh.mu held.
func (sh *shard) remove(h uint64, e *entry) {
	p := sh.m[h]
	if p == e {
		if e.next == nil {
			delete(sh.m, h)
		} else {
			sh.m[h] = e.next
		}
		e.next = nil
		return
	}
	for ; p != nil; p = p.next {
		if p.next == e {
			p.next = e.next
			e.next = nil
			return
		}
	}
}

// touch tells the cache about every 16th use of e (e.mu held): the fast
// table serves hot windows without the cache, whose frequency sketch still
// needs a sample of their uses to rank them against newcomers. The report
// reaches the cache through db.reports, off the hit path.
func (db *DB) touch(e *entry, h uint64) {
	if e.bits = e.bits&^usesMask | (e.bits+1)&usesMask; e.bits&usesMask == 0 {
		db.reports.report(h)
	}
}
