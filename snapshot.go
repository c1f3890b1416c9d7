package ratedb

import (
	"bytes"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// Snapshot writes every window changed since the last snapshot to the file,
// merged into the blocks they fall in, in transactions of at most 131,072
// changed windows and about 16 MiB of blocks, and returns when all have
// committed. It costs in proportion to the windows changed (and the blocks
// they touch), not to the windows held. Hits are never blocked by its disk
// I/O: a window changed while the write is under way is simply written by
// the next snapshot. (A call that would bring a window into a memory already
// holding MaxHotKeys + MaxSnapshotBacklog windows waits for a batch to
// commit, or runs a snapshot itself: see Options.MaxSnapshotBacklog.)
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
	db.maybeBuildPresence()
}

// slabChunk is the size of one chunk of a snapshot's slab.
const slabChunk = 1 << 20

// slab hands out byte slices for the blocks of one write transaction. It
// grows by whole chunks and never moves or reuses bytes already handed out
// while the transaction lives: bbolt keeps every slice passed to Put until
// the transaction ends. Once it has ended, release gives the chunks back to
// pool for the next transaction.
type slab struct {
	buf  []byte
	used [][]byte  // the chunks handed out from, buf's included
	pool *[][]byte // free chunks of slabChunk bytes; nil: allocate each
}

// alloc returns a fresh slice of n bytes.
func (sl *slab) alloc(n int) []byte {
	if cap(sl.buf)-len(sl.buf) < n {
		if p := sl.pool; p != nil && n <= slabChunk && len(*p) > 0 {
			sl.buf = (*p)[len(*p)-1][:0]
			*p = (*p)[:len(*p)-1]
		} else {
			sl.buf = make([]byte, 0, max(n, slabChunk))
		}
		sl.used = append(sl.used, sl.buf)
	}
	start := len(sl.buf)
	sl.buf = sl.buf[:start+n]
	return sl.buf[start : start+n : start+n]
}

// release returns the slab's chunks of slabChunk bytes to its pool. Only
// after the transaction that was given its slices has ended.
func (sl *slab) release() {
	if sl.pool != nil {
		for _, c := range sl.used {
			if cap(c) == slabChunk {
				*sl.pool = append(*sl.pool, c)
			}
		}
	}
	sl.buf, sl.used = nil, nil
}

// maxPooledChunks bounds the slab chunks kept between transactions (32
// MiB): a transaction of snapshotBatch changes at a million windows puts
// about 4 MiB of blocks.
const maxPooledChunks = 32

// snapBufs are a snapshot's buffers, kept from one snapshot to the next so
// that a steady stream of changed windows does not make the garbage
// collector run for them: the queues of dirty entries traded with the
// shards, the change set, and the slab chunks of the blocks put (reused only
// once their transaction has ended).
type snapBufs struct {
	spare  [numShards][]*entry
	set    changeSet
	chunks [][]byte
}

// keep decides, after a snapshot that copied n changes, whether to keep the
// buffers: not when they are more than four times what n needed (a flood
// that has passed), so that they do not hold its memory for ever. Every
// pointer in them is cleared, so nothing they hold keeps an entry alive.
func (b *snapBufs) keep(n int) {
	const floor = 1 << 12
	waste := cap(b.set.changes) > 4*max(n, floor)
	for i := range b.spare {
		clear(b.spare[i][:cap(b.spare[i])])
		if waste || cap(b.spare[i]) > 4*max(n/numShards, floor) {
			b.spare[i] = nil
		}
	}
	clear(b.set.changes[:cap(b.set.changes)])
	if waste {
		b.set = changeSet{}
		b.chunks = nil
	} else if len(b.chunks) > maxPooledChunks {
		clear(b.chunks[maxPooledChunks:])
		b.chunks = b.chunks[:maxPooledChunks]
	}
}

// snapshot copies the dirty windows, writes them in the file's order in batches,
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
	if err := db.fileErr; err != nil {
		// The file must not be written (see auditFile). A snapshot with
		// nothing to write fails too, so that Snapshot, Close and
		// Stats.LastSnapshotError report it on an idle DB as well.
		db.stats.snapshotFailures.Add(1)
		db.stats.lastSnapErr.Store(&err)
		return 0, err
	}

	var lists [numShards][]*entry
	bufs := &db.snapBufs
	n := 0
	for i := range db.shards {
		sh := &db.shards[i]
		sh.dmu.Lock()
		lists[i] = sh.dirty
		sh.dirty = bufs.spare[i][:0]
		sh.dmu.Unlock()
		n += len(lists[i])
	}
	defer func() {
		bufs.spare = lists
		bufs.keep(n)
	}()
	if n == 0 {
		db.stats.lastSnapErr.Store(nil) // nothing to write: this snapshot succeeded
		return 0, nil
	}
	set := &bufs.set
	set.changes, set.keys, set.cs = set.changes[:0], set.keys[:0], set.cs[:0]
	if cap(set.changes) < n {
		set.changes = make([]change, 0, n)
	}
	var buf [record.MaxTiers]counter
	secret := db.secret
	// Number this snapshot and publish it, with nothing committed, before
	// any entry carries its number: see inflight.
	if db.snapSeq = (db.snapSeq + 1) &^ hotBit; db.snapSeq == 0 {
		db.snapSeq = 1 // 0 marks an entry no snapshot copied
	}
	id := db.snapSeq
	db.dropPending(db.publishFront(&snapFront{id: id}))
	defer func() { db.dropPending(db.publishFront(&snapFront{id: id, done: true})) }()
	for _, list := range lists {
		for i, e := range list {
			if i%touchGroup == 0 {
				touch(list[i:min(i+touchGroup, len(list))])
			}
			e.mu.Lock()
			if !e.gone && e.dirty {
				e.dirty = false
				e.hot.setSnap(id)
				var flags uint8
				if e.lowered() {
					flags |= changeLowered
				}
				if !e.hot.Load() {
					flags |= changeCold
				}
				e.setLowered(false) // the copy carries the lowered ends
				var cs []counter
				if !e.tombstone() {
					cs = e.counters(buf[:0])
				}
				var c *change
				if h, ok := e.fileHash(); ok {
					c = set.addHashed(h, e.s.prefix, e.key, cs)
				} else {
					c = set.add(secret, e.s.prefix, e.key, cs)
					e.keepFileHash(c.h)
				}
				c.e, c.flags = e, flags
			}
			e.mu.Unlock()
		}
	}
	// The queued entries are now either records of this snapshot (still
	// in the backlog until their batch commits) or entries that left
	// memory, and the backlog, since they were queued (removeLocked).
	recs := set.changes
	if len(recs) == 0 {
		db.stats.lastSnapErr.Store(nil)
		return 0, nil
	}
	set.sort()

	// Write in batches of sorted records, each its own transaction, so that
	// a large backlog does not build one huge transaction in memory; entries
	// leave memory as their batch commits. A failed batch leaves it and every
	// later one dirty. The crash bound holds per Snapshot call: every window
	// on disk is at least as new as when the last completed snapshot began.
	var written, bytesWritten int64
	for len(recs) > 0 {
		batch := recs[:min(len(recs), snapshotBatch)]
		n, nb, err := db.writeBatch(set, batch)
		if err != nil {
			// Every record not yet committed leaves the backlog and its
			// entry, if still in memory and clean, joins it again.
			db.stats.backlog.Add(-int64(len(recs)))
			// They stay in flight (inflight) until this loop has marked
			// them dirty again: the deferred publication of the end of
			// this snapshot comes after it.
			for i := range recs {
				e := recs[i].e
				e.mu.Lock()
				if recs[i].flags&changeLowered != 0 {
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
		batch = batch[:n]
		written += int64(n)
		bytesWritten += nb
		db.stats.backlog.Add(-int64(len(batch)))
		// The batch is in the file: publish the frontier past it, then take
		// out of memory the entries that were cold when copied and those
		// that waited for this commit (see inflight). Entries that were hot
		// when copied, and still are, are not visited again.
		last := &batch[len(batch)-1]
		pend := db.publishFront(&snapFront{id: id, some: true, h: last.h, key: bytes.Clone(set.key(last))})
		for i := range batch {
			if i%touchGroup == 0 {
				touchCold(batch[i:min(i+touchGroup, len(batch))])
			}
			if batch[i].flags&changeCold == 0 {
				continue
			}
			e := batch[i].e
			e.mu.Lock()
			drop := !e.gone && !e.dirty && !e.hot.Load()
			e.mu.Unlock()
			if drop {
				db.dropIfClean(e)
			}
		}
		db.dropPending(pend)
		recs = recs[len(batch):]
		db.progress.signal()
	}
	db.stats.snapshots.Add(1)
	db.stats.lastSnapDur.Store(int64(time.Since(started)))
	db.stats.lastSnapN.Store(written)
	db.stats.lastSnapB.Store(bytesWritten)
	db.stats.lastSnapErr.Store(nil)
	return written, nil
}

// touchGroup is how many entries touch brings into the cache at once.
const touchGroup = 16

// touch reads fields of each entry that never change, its key's length and
// first byte: the reads miss the cache together, where the entries' locks,
// one atomic instruction each, would wait for each miss in turn. Snapshots
// visit a million scattered entries. An entry with an inline key is the two
// cache lines of its 128-byte size class, and the two reads fall in both:
// the key's header in the first, its bytes (and the entry's tiers pointer)
// in the second.
func touch(es []*entry) {
	n := 0
	for _, e := range es {
		n += touchEntry(e)
	}
	runtime.KeepAlive(n)
}

// touchCold is touch for the entries of changes that were cold when copied.
func touchCold(cs []change) {
	n := 0
	for i := range cs {
		if cs[i].flags&changeCold != 0 {
			n += touchEntry(cs[i].e)
		}
	}
	runtime.KeepAlive(n)
}

// touchEntry reads e's key length and first byte (see touch).
func touchEntry(e *entry) int {
	if k := e.key; len(k) > 0 {
		return int(k[0])
	}
	return 0
}

// snapshotBatch is the most windows one snapshot transaction writes, and
// snapshotTxBytes about the most bytes of blocks (it stops at the first
// block boundary past them): a transaction holds its blocks, and bbolt's
// copies of the pages they touch, in memory until it commits. (Variables
// only so that tests can make batches small.)
var (
	snapshotBatch         = 1 << 17
	snapshotTxBytes int64 = 16 << 20
)

// testBatchHook, when set by a test, runs inside each batch's transaction;
// an error it returns fails the batch.
var testBatchHook func() error

// testDiscardBatches, when set by a benchmark, makes writeBatch write
// nothing and report its whole batch written, so that BenchmarkFlood can
// time a flood of new keys without the file's cost: what no file layout
// could beat. The windows it discards are lost. Never set outside
// benchmarks.
var testDiscardBatches atomic.Bool

// writeBatch writes recs, a run of set.changes sorted by set.compare, in one
// transaction, stopping at a block boundary once snapshotTxBytes bytes of
// blocks are put, and returns how many of recs it wrote (at least one) and
// how many bytes of blocks. It keeps the block index and the window count in
// step.
func (db *DB) writeBatch(set *changeSet, recs []change) (n int, written int64, err error) {
	if testDiscardBatches.Load() {
		return len(recs), 0, nil
	}
	var (
		sl = slab{pool: &db.snapBufs.chunks}
		w  *blockWriter
	)
	// bbolt holds the slab's slices until the transaction ends, committed
	// or not; then they may serve the next one.
	defer sl.release()
	err = db.update(func(tx *bolt.Tx) error {
		sl.release()
		if testBatchHook != nil {
			if err := testBatchHook(); err != nil {
				return err
			}
		}
		var err error
		if w, err = newBlockWriter(tx, db.secret, db.blocks, &sl); err != nil {
			return err
		}
		w.marks = db.presenceMarks()
		if n, err = w.write(set, recs, snapshotTxBytes); err != nil {
			return err
		}
		return putCount(tx, db.stats.diskWindows.Load()+w.delta)
	})
	if err != nil {
		return 0, 0, err
	}
	db.blocks.apply(w.edits)
	db.stats.diskWindows.Add(w.delta)
	db.stats.corrupt.Add(w.corrupt)
	return n, w.written, nil
}
