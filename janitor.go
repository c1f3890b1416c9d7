package ratedb

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// The janitor removes expired windows: a window is removed by the first pass
// at or after its end plus Options.KeyOlderThan. It never scans every key. In
// memory, each entry sits in one slot of an expiry index (slots of
// expiryGranularity, keyed by the time the entry should next be looked at);
// a pass visits only the slots that are due and files an entry that is still
// live again under its new end. In the file, each block of windows has its
// earliest expiry in memory (blockIndex), so a pass reads and rewrites only
// the blocks holding a window that has expired.

// expiryGranularity is the width of an expiry-index slot, in milliseconds.
const expiryGranularity = 1000

// noSlot marks an entry that is not in the expiry index.
const noSlot = math.MinInt64

// cleanBatch bounds the windows one janitor transaction reads.
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
	if x.next != noSlot && nowSlot < x.next {
		// The clock went back since an earlier pass. Every slot below next
		// was taken by that pass; entries filed since then sit in next
		// itself, clamped there however early they fall due. Take them, so
		// that those still live are filed again at their own time, and let
		// next follow the clock back.
		take(x.next)
		x.next = nowSlot
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
// once; one it took out of memory but failed to delete from the file is
// counted by the pass that deletes it, see Stats.Cleaned). The background
// janitor runs the same pass every Options.CleanPeriod; passes run one at a
// time, so a Clean called while another pass runs waits for it. A pass that
// fails counts in Stats.JanitorFailures, whichever ran it.
func (db *DB) Clean() (removed int, err error) {
	if !db.enter(0) {
		return 0, ErrClosed
	}
	defer db.exit(0)
	removed, err = db.clean()
	if err != nil {
		db.stats.janitorFailures.Add(1)
	}
	return removed, err
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

// clean runs one janitor pass. Passes run one at a time (cleanMu): a
// pass's file part must follow its memory part with no other pass between,
// or that pass would delete, and count again, the records of windows this
// one has taken out of memory and counted.
func (db *DB) clean() (int, error) {
	if !db.cleanMu.TryLock() {
		if testCleanWaits != nil {
			testCleanWaits()
		}
		db.cleanMu.Lock()
	}
	defer db.cleanMu.Unlock()
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
		in := db.inflight(e)
		keep := (end == 0 && (e.dirty || in)) || e.lowered() || in
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

// testCleanWaits, when set by a test, runs when a janitor pass waits for
// the one running.
var testCleanWaits func()

// cleanFile deletes the file's windows whose every tier ended at or before
// cutoff, unless memory holds a live entry for them (the next snapshot
// rewrites those), reading only the blocks whose earliest expiry is at or
// before cutoff. It returns how many it deleted that are not in skip
// (windows already counted as removed from memory) and not in memory. If a
// transaction fails, it also subtracts the windows of skip that the file
// still holds (see leftInFile): the pass that deletes them counts them.
func (db *DB) cleanFile(cutoff int64, skip map[string]struct{}) (int, error) {
	db.snapMu.Lock()
	defer db.snapMu.Unlock()
	if db.fileErr != nil {
		return 0, db.fileErr
	}
	var due []uint64
	for k, bi := range db.blocks {
		if bi.minEnd <= cutoff {
			due = append(due, k)
		}
	}
	slices.Sort(due)
	removed := 0
	var (
		blk    record.Block
		keep   []record.BlockWindow
		absorb absorbState
	)
	for len(due) > 0 {
		var (
			w       *blockWriter
			n, used int
		)
		sl := slab{pool: &db.snapBufs.chunks}
		err := db.update(func(tx *bolt.Tx) error {
			sl.release()
			n = 0
			var err error
			if w, err = newBlockWriter(tx, db.secret, db.blocks, &sl); err != nil {
				return err
			}
			w.marks = db.presenceMarks()
			visited := 0
			for used = 0; used < len(due) && visited < cleanBatch; used++ {
				key := due[used]
				kb := layout.BlockKey(key)
				v := w.bb.Get(kb[:])
				if v == nil {
					w.edits = append(w.edits, blockEdit{key: key, del: true})
					continue
				}
				if err := record.DecodeBlock(&blk, kb[:], v); err != nil {
					// Its windows are lost.
					w.corrupt++
					w.delta -= db.blocks[key].n
					if err := w.delete(key); err != nil {
						return err
					}
					continue
				}
				visited += len(blk.Windows)
				var removedHere int
				keep, removedHere = db.keepLive(keep[:0], blk.Windows, cutoff, skip)
				n += removedHere
				if len(keep) == len(blk.Windows) {
					continue
				}
				w.delta -= int64(len(blk.Windows) - len(keep))
				if len(keep) == 0 {
					if err := w.delete(key); err != nil {
						return err
					}
					continue
				}
				m, err := db.absorbNext(w, key, keep, cutoff, skip, &absorb)
				if err != nil {
					return err
				}
				keep = m.windows
				visited += m.visited
				n += m.removed
				if err := w.putOne(key, keep, nil); err != nil {
					return err
				}
				// After the put, which copied keep: keep aliases the
				// absorbed blocks' values.
				for _, k := range m.absorbed {
					if err := w.delete(k); err != nil {
						return err
					}
				}
			}
			if w.delta == 0 {
				return nil
			}
			return putCount(tx, db.stats.diskWindows.Load()+w.delta)
		})
		sl.release() // the transaction has ended
		if err != nil {
			return removed - db.leftInFile(cutoff, skip), err
		}
		db.blocks.apply(w.edits)
		db.stats.diskWindows.Add(w.delta)
		db.stats.corrupt.Add(w.corrupt)
		removed += n
		due = due[used:]
	}
	return removed, nil
}

// leftInFile returns how many windows of skip (removed from memory by a
// pass, and counted by it) a failed pass left in the file for a later pass
// to delete and count: those whose record in the file, in a sound block,
// has ended by cutoff, and whose key has no live entry in memory. Any other
// is counted by no later pass: a damaged block's windows are lost, and a
// record that is live, or whose key's entry is, is rewritten by a snapshot.
// snapMu held. If the file cannot be read, it returns 0: those windows
// count now, and again when a later pass deletes their records.
func (db *DB) leftInFile(cutoff int64, skip map[string]struct{}) int {
	if len(skip) == 0 || db.treeDamaged.Load() {
		return 0
	}
	var expired [][]byte
	err := db.view(func(tx *bolt.Tx) error {
		bb := tx.Bucket(layout.BucketBlocks)
		if bb == nil {
			return errMissingBucket
		}
		c := bb.Cursor()
		var buf [record.MaxTiers]counter
		for k := range skip {
			kb := []byte(k)
			bk, v := layout.SeekBlock(c, layout.Hash(db.secret, kb))
			if v == nil {
				continue
			}
			cs, found, err := record.FindInBlock(buf[:0], bk, v, kb)
			if err == nil && found && record.MaxEnd(cs) <= cutoff {
				expired = append(expired, kb)
			}
		}
		return nil
	})
	if err != nil {
		return 0
	}
	left := 0
	for _, k := range expired {
		if _, live := db.inMemory(k, cutoff); !live {
			left++
		}
	}
	return left
}

// keepLive appends to keep the windows of ws the janitor keeps: those with
// a tier that ends after cutoff, and those whose entry in memory is live
// (the next snapshot rewrites them). It returns keep and how many windows it
// dropped that are neither in skip (windows already counted as removed from
// memory) nor in memory.
func (db *DB) keepLive(keep, ws []record.BlockWindow, cutoff int64, skip map[string]struct{}) ([]record.BlockWindow, int) {
	removed := 0
	for _, win := range ws {
		if record.MaxEnd(win.Counters) > cutoff {
			keep = append(keep, win)
			continue
		}
		inMem, live := db.inMemory(win.Key, cutoff)
		if live {
			// The window moved on in memory; the next snapshot rewrites it.
			keep = append(keep, win)
			continue
		}
		if _, seen := skip[string(win.Key)]; !seen && !inMem {
			removed++
		}
	}
	return keep, removed
}

// Blocks the janitor leaves small absorb the blocks after them: a block
// whose kept windows encode to less than maxBlockBytes()/mergeBelowDiv bytes
// takes in the next block's live windows, and the next, while the merged
// block stays within maxBlockBytes()/mergeUpToDiv (the size a split leaves)
// and at most mergeMaxBlocks blocks. Without it, once a flood's windows
// expire the blocks they filled keep a window or two each, and every
// snapshot after rewrites a block for each changed window.
const (
	mergeBelowDiv  = 4
	mergeUpToDiv   = 2
	mergeMaxBlocks = 64
)

// absorbState is absorbNext's scratch space, reused across blocks.
type absorbState struct {
	blocks []record.Block // the absorbed blocks, decoded
	kept   []record.BlockWindow
	merged []record.BlockWindow
	keys   []uint64
}

// absorbed is what absorbNext merged.
type absorbed struct {
	windows  []record.BlockWindow // the block's windows after the merge, in file order
	absorbed []uint64             // the keys of the blocks merged in, to delete after the put
	visited  int                  // windows read
	removed  int                  // expired windows dropped, counted as keepLive counts
}

// absorbNext merges into keep, the live windows of the block of key, the
// live windows of the blocks after it (see mergeBelowDiv), dropping their
// expired windows and counting them in w.delta. The windows it returns may
// alias the absorbed blocks' values: the caller puts the merged block
// before it deletes them. A damaged block is never absorbed: the janitor
// deletes it as due.
func (db *DB) absorbNext(w *blockWriter, key uint64, keep []record.BlockWindow, cutoff int64, skip map[string]struct{}, st *absorbState) (absorbed, error) {
	res := absorbed{windows: keep}
	if record.BlockLen(keep) >= maxBlockBytes()/mergeBelowDiv {
		return res, nil
	}
	st.merged = append(st.merged[:0], keep...)
	st.keys = st.keys[:0]
	c := w.bb.Cursor()
	kb := layout.BlockKey(key)
	k, _ := c.Seek(kb[:])
	if k == nil || layout.KeyH(k) != key {
		return res, fmt.Errorf("%w: block %016x vanished", ErrCorrupt, key)
	}
	for len(st.keys) < mergeMaxBlocks {
		nk, nv := c.Next()
		if nk == nil {
			break
		}
		if len(st.blocks) == len(st.keys) {
			st.blocks = append(st.blocks, record.Block{})
		}
		b := &st.blocks[len(st.keys)]
		if err := record.DecodeBlock(b, nk, nv); err != nil {
			break
		}
		var removed int
		st.kept, removed = db.keepLive(st.kept[:0], b.Windows, cutoff, skip)
		if record.BlockLen(append(st.merged, st.kept...)) > maxBlockBytes()/mergeUpToDiv {
			break
		}
		st.merged = append(st.merged, st.kept...)
		st.keys = append(st.keys, layout.KeyH(nk))
		res.visited += len(b.Windows)
		res.removed += removed
		w.delta -= int64(len(b.Windows) - len(st.kept))
	}
	if len(st.keys) > 0 {
		res.windows, res.absorbed = st.merged, st.keys
	}
	return res, nil
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
