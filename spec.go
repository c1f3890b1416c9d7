package ratedb

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"time"

	"github.com/ratedb/ratedb/internal/limits"
)

// MaxKeyLen is the largest key, in bytes, that a limiter accepts.
const MaxKeyLen = limits.MaxKeyLen

// maxCount is the largest count a window can hold.
const maxCount = int64(^uint64(0) >> 1)

// spec is what a Window or Layered limiter is: an algorithm and one scale per
// tier. It owns the keys of its entries in memory and on disk. There is one
// spec per distinct (algorithm, scales, kind) in a DB.
type spec struct {
	db     *DB
	alg    Algorithm
	scales []int64      // milliseconds, one per tier
	prefix []byte       // prefix of the key of every record in the file
	seed   maphash.Seed // of the in-memory hash: one per spec, so specs' keys hash apart
	window *Window      // the Window handle, for single-tier specs
}

// specFor returns the DB's spec for alg and scales, creating it on first use.
func (db *DB) specFor(alg Algorithm, scales []int64, layered bool) (*spec, error) {
	prefix := specPrefix(alg, scales, layered)
	db.specMu.Lock()
	defer db.specMu.Unlock()
	if db.closing.Load() {
		return nil, ErrClosed
	}
	if s, ok := db.specs[string(prefix)]; ok {
		return s, nil
	}
	s := &spec{
		db:     db,
		alg:    alg,
		scales: scales,
		prefix: prefix,
		seed:   maphash.MakeSeed(),
	}
	if !layered {
		s.window = &Window{spec: s}
	}
	db.specs[string(prefix)] = s
	return s, nil
}

// specPrefix is the record-key prefix of a spec: the algorithm (with the top
// bit set for a Layered limiter), the number of tiers for a Layered limiter,
// and each scale in milliseconds (8 bytes, big endian).
func specPrefix(alg Algorithm, scales []int64, layered bool) []byte {
	var p []byte
	if layered {
		p = append(p, byte(alg)|0x80, byte(len(scales)))
	} else {
		p = append(p, byte(alg))
	}
	for _, sc := range scales {
		p = binary.BigEndian.AppendUint64(p, uint64(sc))
	}
	return p
}

// scaleMillis validates a scale and converts it to milliseconds (the rule
// every backend shares: internal/limits).
func scaleMillis(scale time.Duration) (int64, error) { return limits.ScaleMillis(scale) }

// checkCall returns ErrClosed once Close has begun, whatever the call's
// arguments (see ErrClosed), and otherwise validates the arguments every
// keyed call shares. The key itself is never echoed: it may be personal
// data. The call still checks Close with enter, which admits it.
func (db *DB) checkCall(ctx context.Context, key string) error {
	if db.closing.Load() {
		return ErrClosed
	}
	return limits.CheckCall(ctx, key)
}

// hash is the in-memory hash of key under this spec. It is seeded per spec
// and process and never persisted.
func (s *spec) hash(key string) uint64 { return maphash.String(s.seed, key) }

// nextEnd returns the end of the window that tier i of key opens at now.
func (s *spec) nextEnd(i int, key string, now int64) int64 {
	scale := s.scales[i]
	switch s.alg {
	case PerKeyWindow:
		return perKeyEnd(now, scale)
	case StaggeredWindow:
		return staggeredEnd(now, scale, staggerOffset(key, scale))
	default:
		return fixedEnd(now, scale)
	}
}

// newEntry returns an entry for key holding cs (len(cs) == len(s.scales)).
func (s *spec) newEntry(key string, cs []counter) *entry {
	e := allocEntry(key)
	e.s, e.expSlot = s, noSlot
	if n := len(s.scales); n > 1 {
		more := make([]counter, n-1)
		e.more = &more
	}
	e.setCounters(cs)
	return e
}

// acquire returns key's entry with its mu held, loading it from the cold
// store and offering it to the cache as needed, and the time of the call.
// The caller applies the clock model's cap (capEnds) before using it.
// cold reports that the cache does not hold the entry; pass it to release.
//
// The clock is read only once the entry can no longer leave memory (with
// the shard's lock held on the slow path, the entry's on the fast path): a
// janitor pass removes a window judged ended at its own reading, so a call
// that read the clock before that pass and acted after it would find the
// window gone and open a second counter for it (bug 0 of issue 9). Read
// under the lock, the call's time is at least the pass's.
func (s *spec) acquire(key string, h uint64) (e *entry, now int64, cold bool, err error) {
	db := s.db
	if testBeforeAcquire != nil {
		testBeforeAcquire()
	}
	if e := db.fastFind(h, s, key); e != nil {
		e.mu.Lock()
		// A cold entry takes the slow path, which offers it to the cache
		// again: otherwise a busy window the cache evicted would stay in
		// memory beyond MaxHotKeys.
		if !e.gone && e.hot.Load() {
			now, err := db.now()
			if err != nil {
				e.mu.Unlock()
				return nil, 0, false, err
			}
			db.touch(e, h)
			return e, now, false, nil
		}
		e.mu.Unlock()
	}
	sh := db.shard(h)
	sh.mu.Lock()
	for e = sh.find(h, s, key); e == nil && db.memoryFull(); e = sh.find(h, s, key) {
		sh.mu.Unlock()
		if err := db.relieve(); err != nil {
			return nil, 0, false, err
		}
		sh.mu.Lock()
	}
	created, fresh := false, false
	if e == nil {
		var buf [maxTiersInline]counter
		cs, found, fh, err := s.load(key, buf[:0])
		if err != nil {
			sh.mu.Unlock()
			return nil, 0, false, err
		}
		e = s.newEntry(key, cs)
		if db.persist {
			e.keepFileHash(fh)
		}
		sh.insert(h, e)
		db.memWindows.Add(1)
		created, fresh = true, !found
	}
	e.mu.Lock()
	// Read with e.mu held: a call on the fast path holds only e.mu, so a
	// reading taken before waiting for it could be older than the time that
	// call acted at.
	now, err = db.now()
	if err != nil {
		if created {
			db.removeLocked(sh, h, e)
		}
		e.mu.Unlock()
		sh.mu.Unlock()
		return nil, 0, false, err
	}
	if created {
		db.exp.add(e, db.expiryAt(e.maxEnd(), now))
		if !fresh {
			db.stats.reloaded.Add(1) // counted once kept: a refused call removed it
		}
	}
	if !e.hot.Load() {
		// Once memory holds MaxHotKeys hot windows (the cache is full),
		// a window just opened, with no record in the file, is not
		// offered until its second use: a key used once (a flood of
		// spoofed addresses or random API keys) then never reaches the
		// cache, where it could still evict a busy window (sketch
		// collisions let through about a quarter of such a flood) and
		// where every offer costs the cache's policy a sample of its
		// residents. It stays cold: with a file it leaves memory once a
		// snapshot has written it, as a window the cache declined would.
		// While the cache has room, nothing is evicted, and new windows
		// go in at once. (Hot windows, not all windows in memory: cold
		// ones waiting for a snapshot would keep a cache with room from
		// taking new ones.)
		//
		// No entry of h is offered while uncache has yet to delete h from
		// the cache (see uncache): it stays cold until the next use.
		offer := (!fresh || db.hotWindows.Load() < db.opts.MaxHotKeys) && sh.uncaching[h] == 0
		// Either way this use is counted in the cache's frequency sketch,
		// so that a window in use earns its place against the residents:
		// the cache admits a newcomer only if it has been used at least
		// as often as the resident it would evict, and it counts only
		// Gets. Before an offer the Get is made here, so that the sketch
		// has the use when the cache weighs the offer; otherwise the use
		// goes through the reporter, as a hot window's sampled uses do:
		// the Get's look-up in the cache's store misses the CPU cache, and
		// made here it was a fifth of a flood's new key (with the shard's
		// lock held). Neither call blocks.
		if offer {
			db.cache.Get(h)
			if db.cache.Set(h, e, 1) {
				e.hot.Store(true)
				db.hotWindows.Add(1)
			}
		} else {
			db.reports.report(h)
		}
	}
	cold = !e.hot.Load()
	sh.mu.Unlock()
	if !cold {
		db.fastStore(h, e)
		db.touch(e, h)
	}
	return e, now, cold, nil
}

// capEnds caps every window of e to end at most one scale after now (the
// clock model of the package documentation): on a correct clock no window
// ends later, so a later end comes from a clock that read ahead when the
// window opened, or reads behind now.
// The cap is stored, so the window then ends at a fixed instant (mutate
// takes it back if its call fails). e.mu held.
func (s *spec) capEnds(e *entry, h uint64, now int64) (changed bool) {
	for i := range s.scales {
		if c, lim := e.tier(i), now+s.scales[i]; c.End > lim {
			c.End = lim
			changed = true
		}
	}
	if changed {
		e.setLowered(s.db.persist)
		s.db.markDirty(e, h)
		s.db.exp.add(e, s.db.expiryAt(e.maxEnd(), now))
	}
	return changed
}

// capCopy caps the windows of a copy of a key's counters as capEnds does,
// for a call that only reads them.
func (s *spec) capCopy(cs []counter, now int64) {
	for i := range cs {
		if lim := now + s.scales[i]; cs[i].End > lim {
			cs[i].End = lim
		}
	}
}

// mutate runs fn on key's entry with the entry locked, passing the time
// read under that lock, and marks the entry dirty if fn reports a change
// (fn changes nothing when it returns an error).
func (s *spec) mutate(key string, fn func(e *entry, now int64) (changed bool, err error)) error {
	db := s.db
	h := s.hash(key)
	if !db.enter(h) {
		return ErrClosed
	}
	defer db.exit(h)
	e, now, cold, err := s.acquire(key, h)
	if err != nil {
		return err
	}
	defer s.release(e, cold)
	// The cap of the clock model is stored only by a call that succeeds: a
	// call that returns an error changes nothing.
	var buf [maxTiersInline]counter
	saved, lowered := e.counters(buf[:0]), e.lowered()
	capped := s.capEnds(e, h, now)
	changed, err := fn(e, now)
	if err != nil && capped {
		e.setCounters(saved)
		e.setLowered(lowered)
	}
	if changed {
		db.markDirty(e, h)
	}
	return err
}

// testBeforeAcquire, when set by a test, runs at the start of every
// acquire, before any lock is taken.
var testBeforeAcquire func()

// release unlocks an entry obtained from acquire. An entry the cache did not
// take leaves memory at once if the file already holds its state.
func (s *spec) release(e *entry, cold bool) {
	e.mu.Unlock()
	if cold && s.db.persist {
		s.db.dropIfClean(e)
	}
}

// peek appends a copy of key's counters to dst without creating an entry,
// and returns the time of the call, read under the same lock as the copy
// (see acquire). It returns dst unchanged (empty) if the key has no state
// anywhere.
func (s *spec) peek(key string, h uint64, dst []counter) ([]counter, int64, error) {
	db := s.db
	if e := db.fastFind(h, s, key); e != nil {
		e.mu.Lock()
		if !e.gone {
			now, err := db.now()
			if err == nil {
				dst = e.counters(dst)
				s.capCopy(dst, now)
			}
			e.mu.Unlock()
			return dst, now, err
		}
		e.mu.Unlock()
	}
	sh := db.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.find(h, s, key); e != nil {
		e.mu.Lock()
		defer e.mu.Unlock()
		now, err := db.now() // with e.mu held: see acquire
		if err != nil {
			return dst[:0], 0, err
		}
		dst = e.counters(dst)
		s.capCopy(dst, now)
		return dst, now, nil
	}
	now, err := db.now()
	if err != nil {
		return dst[:0], 0, err
	}
	cs, found, _, err := s.load(key, dst)
	if err != nil || !found {
		return dst[:0], now, err
	}
	s.capCopy(cs, now)
	return cs, now, nil
}

// reset clears every tier of key's window. In memory-only mode the entry
// simply leaves memory; with a file, a tombstone stays until a snapshot has
// deleted the key's record.
func (s *spec) reset(key string) error {
	db := s.db
	h := s.hash(key)
	if !db.enter(h) {
		return ErrClosed
	}
	defer db.exit(h)
	sh := db.shard(h)
	sh.mu.Lock()
	e := sh.find(h, s, key)
	for ; e == nil && db.memoryFull(); e = sh.find(h, s, key) {
		sh.mu.Unlock()
		if err := db.relieve(); err != nil {
			return err
		}
		sh.mu.Lock()
	}
	// A clock reading out of range refuses the call, as it refuses every
	// other: a Reset that returns an error changes nothing.
	now, err := db.now()
	if err != nil {
		sh.mu.Unlock()
		return err
	}
	if e == nil {
		if !db.persist {
			sh.mu.Unlock()
			return nil
		}
		var buf [maxTiersInline]counter
		cs, found, fh, err := s.load(key, buf[:0])
		if err != nil || !found {
			sh.mu.Unlock()
			return err
		}
		e = s.newEntry(key, cs)
		e.keepFileHash(fh)
		sh.insert(h, e)
		db.memWindows.Add(1)
		db.exp.add(e, db.expiryAt(e.maxEnd(), now))
	}
	e.mu.Lock()
	for i := 0; i < e.tiers(); i++ {
		*e.tier(i) = counter{}
	}
	wasHot := false
	if db.persist {
		e.setLowered(true)
		db.markDirty(e, h)
	} else {
		wasHot = db.removeLocked(sh, h, e)
	}
	e.mu.Unlock()
	sh.mu.Unlock()
	if wasHot {
		db.uncache([]uint64{h})
	}
	return nil
}

// maxTiersInline sizes stack buffers for counters.
const maxTiersInline = 16

// maxScaleMillis is the longest scale, in milliseconds (the longest
// time.Duration).
const maxScaleMillis = int64(1<<63-1) / int64(time.Millisecond)
