package ratedb

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/ratedb/ratedb/internal/layout"
)

// A window a snapshot has copied is in flight until the transaction that
// writes it commits: until then the file holds an older state, so the entry
// must not leave memory (a later call would read the older state back).
//
// Being in flight is not a flag in the entry, which the snapshot would have
// to visit again, under its lock, after each commit: at a million windows
// that second visit of scattered entries was a tenth of a snapshot's CPU.
// Instead the copy stamps the entry with the snapshot's number (hotWord),
// and the snapshot publishes how far it has committed (a frontier): the
// changes are written in the order they are sorted in, by (file hash,
// record key), so the ones committed are exactly those up to the last
// change of the last batch that committed. An entry is in flight when the
// snapshot in progress copied it and it lies past that frontier.
//
// Entries that should leave memory once written are taken out by the
// snapshot after their commit: those cold when copied (the snapshot notes
// which), and those that became cold, or were released by a call, while in
// flight. These go on a pending list (dropAfterCommit), which the snapshot
// takes when it publishes each frontier. Checking whether an entry is in
// flight and putting it on the list happen under pendMu, as do publishing a
// frontier and taking the list, so an entry is either seen committed or
// taken by the next look at the list, never missed by both.
//
// Stamps are 31 bits: one repeats after 2^31-1 snapshots (25 days at one a
// millisecond), so an entry no snapshot copied for that long can read as in
// flight during the snapshot that has its number. That errs on the safe
// side: it only delays the entry's leaving memory to that snapshot's next
// commit, or to the janitor's next pass.

// snapFront is how far the snapshot id has committed.
type snapFront struct {
	id   uint32 // the snapshot (DB.snapSeq); 0: none yet
	done bool   // it has ended: none of its copies is still uncommitted
	some bool   // a batch of it has committed: h and key are its last change
	h    uint64
	key  []byte // the record key of its last committed change (a copy)
}

// inflightState is the DB's part of the above.
type inflightState struct {
	snapSeq uint32                    // number of the last snapshot that copied windows, below 1<<31 (snapMu)
	front   atomic.Pointer[snapFront] // never nil once Open returns
	pendMu  sync.Mutex
	pend    []*entry // entries to take out of memory once their copy commits (pendMu)
}

// inflight reports whether a snapshot has copied e and not yet committed the
// copy. e.mu held.
func (db *DB) inflight(e *entry) bool {
	id := e.hot.snap()
	if id == 0 {
		return false
	}
	f := db.front.Load()
	if id != f.id || f.done {
		return false
	}
	if !f.some {
		return true
	}
	h, k := db.recordPos(e)
	switch {
	case h != f.h:
		return h > f.h
	default:
		return bytes.Compare(k, f.key) > 0
	}
}

// recordPos returns e's place in a snapshot's order: the file hash of its
// record key, and the record key. e.mu held. (Slow paths only: it
// allocates.)
func (db *DB) recordPos(e *entry) (uint64, []byte) {
	k := make([]byte, 0, len(e.s.prefix)+len(e.key))
	k = append(append(k, e.s.prefix...), e.key...)
	if h, ok := e.fileHash(); ok {
		return h, k
	}
	return layout.Hash(db.secret, k), k
}

// dropAfterCommit takes e, a clean cold entry, out of memory unless it is
// in flight, in which case the snapshot takes it out once its copy has
// committed. sh.mu and e.mu held. It reports whether e was removed (and so
// whether the cache may still hold it: see removeLocked).
func (db *DB) dropAfterCommit(sh *shard, h uint64, e *entry) (wasHot bool) {
	// An entry once seen out of flight stays out (its stamp cannot change
	// while e.mu is held, and the frontier only moves on): only one in
	// flight needs pendMu, to be checked again and listed.
	if !db.inflight(e) {
		return db.removeLocked(sh, h, e)
	}
	db.pendMu.Lock()
	in := db.inflight(e)
	if in {
		db.pend = append(db.pend, e)
	}
	db.pendMu.Unlock()
	if in {
		return false
	}
	return db.removeLocked(sh, h, e)
}

// publishFront makes f the frontier and returns the entries waiting for a
// commit to leave memory. snapMu held.
func (db *DB) publishFront(f *snapFront) []*entry {
	db.pendMu.Lock()
	defer db.pendMu.Unlock()
	db.front.Store(f)
	pend := db.pend
	db.pend = nil
	return pend
}

// dropPending takes each entry of pend that is clean and cold out of memory,
// or puts it back on the pending list if it is still in flight. No lock
// held.
func (db *DB) dropPending(pend []*entry) {
	for _, e := range pend {
		db.dropIfClean(e)
	}
}
