package ratedb

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// The fast table is a lock-free first look-up of recently used hot entries,
// so that a hit on a hot window touches neither a shard lock nor the cache.
// It is set-associative: a key's hash picks one bucket of fastWays slots,
// and a bucket is one 64-byte cache line holding a one-byte tag (8 bits of
// the hash) per slot next to the slots. A look-up reads that one line and
// dereferences only entries whose tag matches, so at a million windows a hit
// costs one cache miss for the table and one for its entry.
//
// Tags and slots are written separately, so a reader may see a tag that does
// not belong to its slot's entry: a tag is only a hint. An entry found here
// is used only after checking its spec and key, and then, under its lock,
// that it is still in memory (not gone), so a stale or torn slot costs a
// look-up on the shard map, never a count. The shard map stays the authority.

// fastWays is the number of slots in a bucket: seven pointers and the tag
// word fill a 64-byte cache line.
const fastWays = 7

// fastBucket is one bucket of the fast table.
type fastBucket struct {
	tags  atomic.Uint64 // byte i is the tag of slot i (i < fastWays)
	slots [fastWays]atomic.Pointer[entry]
}

// fastTableSize is the number of fast-table buckets for windows windows:
// about two slots per window (the table stays under half full, so buckets
// rarely overflow), at least 64 and at most 1<<19 buckets (64 bytes each:
// 32 MiB).
func fastTableSize(windows int64) int {
	n := (2*windows + fastWays - 1) / fastWays
	return int(min(max(n, 64), 1<<19))
}

// fastBytes is the size in bytes of a fast table of n buckets.
func fastBytes(n int) float64 { return 64 * float64(n) }

// fastTable is the fast table at one size. It grows with the windows in
// memory, up to the size for MaxHotKeys: a table sized for a million
// windows serving a few hundred thousand would spread them over 19 MiB
// of lines that no cache holds, where one sized for them fits the last
// level cache (at 200,000 windows, 3.6 MiB).
type fastTable struct {
	b    []fastBucket
	grow int64 // windows in memory beyond which a larger table replaces it; math.MaxInt64 at full size
}

// fastInitWindows is the windows the first fast table is sized for.
const fastInitWindows = 4096

// newFastTable returns an empty fast table for windows windows, at most
// maxHot.
func newFastTable(windows, maxHot int64) *fastTable {
	windows = min(windows, maxHot)
	t := &fastTable{b: make([]fastBucket, fastTableSize(windows)), grow: windows}
	if windows == maxHot {
		t.grow = math.MaxInt64
	}
	return t
}

// growFast replaces the table t, which the windows in memory have
// outgrown, with an empty one four times their number (at most the size
// for MaxHotKeys). The table is only a hint, so the windows t held simply
// take the shard map once more and are stored in the new one; a concurrent
// store into t is lost the same way. Slow path only.
func (db *DB) growFast(t *fastTable) {
	nt := newFastTable(4*db.memWindows.Load(), db.opts.MaxHotKeys)
	db.fast.CompareAndSwap(t, nt)
}

// fastBucketOf returns h's bucket and tag. The bucket comes from bits 8-39
// of h (a multiply-shift range reduction, so the table need not be a power
// of two) and the tag from its top byte; the shard comes from its low byte.
func (db *DB) fastBucketOf(h uint64) (*fastBucket, uint64) {
	return fastBucketIn(db.fast.Load(), h)
}

func fastBucketIn(t *fastTable, h uint64) (*fastBucket, uint64) {
	i := uint64(uint32(h>>8)) * uint64(len(t.b)) >> 32
	return &t.b[i], h >> 56
}

// fastMatch returns a mask with bit 8i+7 set for every slot i whose tag may
// equal tag (a false positive, never a false negative).
func fastMatch(tags, tag uint64) uint64 {
	const lo, hi = 0x0001010101010101, 0x0080808080808080 // fastWays bytes
	x := tags ^ (tag * lo)
	return (x - lo) &^ x & hi
}

// fastFind returns the entry for (s, key) if h's bucket holds it.
func (db *DB) fastFind(h uint64, s *spec, key string) *entry {
	b, tag := db.fastBucketOf(h)
	for m := fastMatch(b.tags.Load(), tag); m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m) / 8
		if e := b.slots[i].Load(); e != nil && e.s == s && e.key == key {
			return e
		}
	}
	return nil
}

// fastStore puts e in h's bucket: in the slot already holding it, else in
// one that is empty or holds an entry that left memory or the cache, else
// in a slot chosen by the hash.
func (db *DB) fastStore(h uint64, e *entry) {
	t := db.fast.Load()
	if db.memWindows.Load() > t.grow {
		db.growFast(t)
		t = db.fast.Load()
	}
	b, tag := fastBucketIn(t, h)
	victim := -1
	for i := range fastWays {
		o := b.slots[i].Load()
		if o == e {
			victim = i
			break
		}
		if victim < 0 && (o == nil || !o.hot.Load()) {
			victim = i
		}
	}
	if victim < 0 {
		victim = int(h>>40) % fastWays
	}
	b.slots[victim].Store(e)
	shift := 8 * uint(victim)
	for {
		old := b.tags.Load()
		nw := old&^(0xff<<shift) | tag<<shift
		if old == nw || b.tags.CompareAndSwap(old, nw) {
			return
		}
	}
}
