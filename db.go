package ratedb

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/ratedb/ratedb/internal/siphash"
	bolt "go.etcd.io/bbolt"
)

// DB is a rate-limit database: windows counted in memory and, when it has a
// file, snapshotted to it so that counts survive a restart.
//
// A DB is safe for concurrent use. Close it when done: Close writes a final
// snapshot, and calls made after Close has begun return ErrClosed.
type DB struct {
	opts       Options
	path       string
	persist    bool     // path != "": the DB has a file
	bolt       *bolt.DB // nil in memory-only mode; read under boltMu or snapMu, switched by rebuild holding both
	boltMu     sync.RWMutex
	fileErr    error       // set (snapMu held) when the file must not be written: see auditFile
	secret     siphash.Key // the file's hash key: set by Open, then never changed (a rebuild keeps it)
	blocks     blockIndex  // every block's earliest expiry and size (snapMu)
	snapBufs   snapBufs    // a snapshot's buffers, kept for the next one (snapMu)
	auditIndex blockIndex  // the blockIndex the audit after Open read (snapMu)
	cache      *ristretto.Cache[uint64, *entry]
	reports    *reporter // sampled uses of hot windows, on their way to cache
	kot        int64     // Options.KeyOlderThan in milliseconds
	log        *slog.Logger

	// treeDamaged is set when the blocks bucket's page tree failed
	// layout.CheckTree at Open, until a rebuild replaces the file: look-ups
	// in the file then fail, since bbolt's cursors recurse or loop without
	// end down a cycle, a fatal error (see loadFile).
	treeDamaged atomic.Bool

	// damagedLogAt is when (Unix ns, wall clock) a look-up last logged a
	// damaged block: see logDamagedBlock.
	damagedLogAt atomic.Int64

	shards [numShards]shard
	fast   atomic.Pointer[fastTable] // see fasttable.go

	// The presence filter (presence.go): the one in use, the one being
	// built (both written under snapMu), and whether a build is running.
	presence, presenceNext atomic.Pointer[presence]
	building               atomic.Bool
	exp                    expiryIndex

	// closing is set when Close begins; calls in flight are counted per
	// shard (shard.entered and its exit counters), so Close can wait for them before it takes the
	// final snapshot and closes the cache.
	closing  atomic.Bool
	shutdown atomic.Bool // set once Close has quiesced callers

	clock  func() time.Time // Options.Clock; nil: the coarse clock
	coarse coarseClock

	specMu sync.Mutex
	specs  map[string]*spec

	snapMu  sync.Mutex // one writer of the file at a time: snapshots, janitor passes, the audit after Open
	cleanMu sync.Mutex // one janitor pass at a time: see clean

	memWindows atomic.Int64
	hotWindows atomic.Int64 // windows in memory marked hot: see spec.acquire
	memLimit   int64        // MaxHotKeys + MaxSnapshotBacklog: see relieve
	progress   progress     // wakes calls waiting in relieve
	inflightState
	stats counters

	stop chan struct{}
	wg   sync.WaitGroup
}

// Open opens the database at path, creating it if it does not exist, or an
// in-memory database when path is "" (nothing is persisted). nil opts means
// all defaults.
//
// Open returns an error wrapping ErrInvalidArgument for invalid options,
// ErrNotRegularFile for a path that exists but is not a regular file,
// ErrClockOutOfRange when the system clock (the default Options.Clock)
// reads out of range, ErrLocked when another handle holds the file after
// Options.OpenTimeout, and ErrCorrupt for a file that is not a valid ratedb
// database (unless Options.OnCorrupt says otherwise); a read of the file
// that fails (an I/O error such as EIO) is returned wrapped, not as
// ErrCorrupt. Opening reads
// the file's metadata and the shape of its page trees (the branch pages and
// the header of every page they link to: bbolt follows the links unchecked,
// and a link back up a tree would crash the process), never every window: windows are loaded on
// their first use. If the tree of windows is damaged, look-ups in the file
// return ErrCorrupt until the pass below has rebuilt it. A file of the
// previous format, ratedb/1, is migrated first, in one transaction.
//
// After Open returns, a background pass reads the structure of every page of
// the file (and its keys' order: each branch key must be the first key of
// the page it links to, or look-ups would go astray), and the header of
// every block of windows (the janitor's index),
// before the first snapshot or janitor pass may write to it: bbolt checksums
// only its meta pages, and a damaged page it rewrote could make it allocate
// gigabytes or spread the damage. If a page is damaged, the file is rebuilt
// from every sound block (see Options.OnCorrupt). If that rebuild fails, or
// the pass cannot read the file, the DB stops writing the file (see Damaged
// files in the package documentation). Hits do not wait for this pass;
// snapshots, Clean and Close do.
func Open(path string, opts *Options) (*DB, error) {
	o := opts.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	db := &DB{
		opts:     o,
		path:     path,
		persist:  path != "",
		kot:      o.KeyOlderThan.Milliseconds(),
		log:      o.Logger,
		clock:    o.Clock,
		specs:    make(map[string]*spec),
		stop:     make(chan struct{}),
		memLimit: o.MaxHotKeys + min(o.MaxSnapshotBacklog, math.MaxInt64-o.MaxHotKeys), // saturated: MaxInt64 is "no bound"
	}
	db.fast.Store(newFastTable(fastInitWindows, o.MaxHotKeys))
	db.front.Store(&snapFront{done: true})
	for i := range db.shards {
		db.shards[i].m = make(map[uint64]*entry)
	}
	db.exp.init()
	if db.clock == nil {
		if err := db.coarse.init(); err != nil {
			return nil, err
		}
		db.wg.Add(1)
		go func() {
			defer db.wg.Done()
			db.coarse.run(db.stop)
		}()
	}
	if path != "" {
		if err := db.openFile(); err != nil {
			close(db.stop)
			db.wg.Wait()
			return nil, err
		}
	}
	cache, err := ristretto.NewCache(&ristretto.Config[uint64, *entry]{
		NumCounters:        max(10*o.MaxHotKeys, 1000),
		MaxCost:            max(o.MaxHotKeys, 1),
		BufferItems:        64,
		IgnoreInternalCost: true,
		OnEvict:            func(it *ristretto.Item[*entry]) { db.spill(it.Value) },
		OnReject:           func(it *ristretto.Item[*entry]) { db.spill(it.Value) },
		// A Set never replaces, in place, another entry of the same hash:
		// that entry left memory (a key has one entry at a time), and the
		// Del that uncache queued for it, still on its way through the
		// cache's buffer, would then delete the new entry from the cache
		// without calling spill, stranding it hot outside the cache. Such
		// a Set is queued behind that Del instead.
		ShouldUpdate: func(cur, prev *entry) bool { return cur == prev },
	})
	if err != nil {
		close(db.stop)
		db.wg.Wait()
		if db.bolt != nil {
			_ = db.bolt.Close()
		}
		return nil, fmt.Errorf("ratedb: creating cache: %w", err)
	}
	db.cache = cache
	db.reports = newReporter(func(h uint64) {
		if testReportGet != nil {
			testReportGet(h)
		}
		cache.Get(h)
	})
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		db.reports.run(db.stop)
	}()
	if db.persist {
		// Nothing writes the file until its audit is done.
		db.snapMu.Lock()
		db.wg.Add(1)
		go func() {
			defer db.wg.Done()
			db.auditFile()
		}()
	}
	if db.persist && o.SnapshotPeriod > 0 {
		db.every(o.SnapshotPeriod, db.backgroundSnapshot)
	}
	if o.CleanPeriod > 0 {
		db.every(o.CleanPeriod, db.backgroundClean)
	}
	return db, nil
}

// every runs fn every period on a goroutine that Close stops and waits for.
func (db *DB) every(period time.Duration, fn func()) {
	db.wg.Add(1)
	go func() {
		defer db.wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-db.stop:
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

// Close waits for calls in flight, stops the background work, writes a final
// snapshot and closes the file. A Close that returns nil loses no count; if
// the final snapshot fails, the changes it could not write are lost (the
// file keeps the last completed snapshot). Only the first call does this
// and returns its result (nil, or the errors of the final snapshot and of
// closing the file, joined); every later call does nothing and returns
// ErrClosed, as does every other method of the DB and its limiters once
// Close has begun, whatever its arguments.
func (db *DB) Close() error {
	if !db.closing.CompareAndSwap(false, true) {
		return ErrClosed
	}
	// Wait for calls in flight, shard by shard: see quiesced.
	for i := range db.shards {
		for !db.shards[i].quiesced() {
			time.Sleep(50 * time.Microsecond)
		}
	}

	close(db.stop)
	db.wg.Wait()
	var errs []error
	if err := db.snapshot(); err != nil {
		errs = append(errs, fmt.Errorf("ratedb: final snapshot: %w", err))
	}
	db.shutdown.Store(true)
	db.cache.Close()
	if db.bolt != nil {
		if err := db.bolt.Close(); err != nil {
			errs = append(errs, fmt.Errorf("ratedb: closing file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// enter admits a call on a key with hash h (0 for calls on no key); it
// returns false once Close has begun. Every true enter must be paired with
// exit(h).
func (db *DB) enter(h uint64) bool {
	sh := db.shard(h)
	sh.entered.Add(1)
	if db.closing.Load() {
		sh.exited.Add(1)
		return false
	}
	return true
}

// exit ends a call admitted by enter.
func (db *DB) exit(h uint64) { db.shard(h).exited.Add(1) }

// exitHit ends a Hit admitted by enter and counts its decision for Stats.
func (db *DB) exitHit(h uint64, allowed bool) {
	sh := db.shard(h)
	if allowed {
		sh.allowed.Add(1)
	} else {
		sh.denied.Add(1)
	}
}

// quiesced reports whether no call admitted before Close began is still in
// progress on the shard; Close sets closing first. The counters only grow and
// exits never exceed entries, so if the exits, read first, equal the entries,
// read after them, then at the moment the last exit counter was read every
// call that had entered had exited, and any call entering later sees closing.
func (sh *shard) quiesced() bool {
	x := sh.exited.Load() + sh.allowed.Load() + sh.denied.Load()
	return sh.entered.Load() == x
}

func (db *DB) shard(h uint64) *shard { return &db.shards[h%numShards] }

// markDirty queues e for the next snapshot. e.mu held.
func (db *DB) markDirty(e *entry, h uint64) {
	if !db.persist || e.dirty {
		return
	}
	e.dirty = true
	db.stats.backlog.Add(1)
	sh := db.shard(h)
	sh.dmu.Lock()
	sh.dirty = append(sh.dirty, e)
	sh.dmu.Unlock()
}

// removeLocked takes e out of memory. sh.mu and e.mu held. It reports whether
// the cache may still hold e: the caller then passes h to uncache after
// releasing sh.mu.
func (db *DB) removeLocked(sh *shard, h uint64, e *entry) (wasHot bool) {
	e.gone = true
	sh.remove(h, e)
	db.exp.remove(e)
	db.memWindows.Add(-1)
	if e.dirty {
		// Only the janitor removes a changed window, one whose change the
		// file need not get (see clean): it leaves the snapshot backlog
		// now. The next snapshot skips it in its queue.
		e.dirty = false
		db.stats.backlog.Add(-1)
	}
	if e.hot.Load() {
		// Not hot any more, so that fastStore may reuse its slot: a slot
		// left to a removed hot entry would shadow the key's next entry
		// in the fast table, sending every hit on it down the slow path.
		e.hot.Store(false)
		db.hotWindows.Add(-1)
		if sh.uncaching == nil {
			sh.uncaching = make(map[uint64]int32)
		}
		sh.uncaching[h]++ // until uncache has queued the Del
		return true
	}
	return false
}

// uncache deletes from the cache the hashes of entries that removeLocked
// took out of memory while the cache might hold them. It must be called with
// no lock held: Del can block on the cache's buffer, whose goroutine takes
// shard locks in spill.
//
// Between the removal and Del, a call on the same key may have created a new
// entry and offered it to the cache; the cache then replaced the old value in
// place, and Del evicts the new entry without calling spill, which would
// leave it marked hot but outside the cache, never spilled: memory beyond
// MaxHotKeys (bug 7 of issue 9). So every entry of h still marked hot is
// offered to the cache again, or spilled if the cache refuses it.
//
// Until then, acquire offers no entry of h (sh.uncaching): an entry it
// offered before the Del was queued would be offered twice, its first Set
// still in the cache's buffer ahead of the Del. The cache rejects that Set
// (its policy still holds h), and spill marks the entry cold; then it
// admits the second, and its store holds a cold entry, which then leaves
// memory without a Del (a snapshot writes it): every later offer of the key
// is rejected (ShouldUpdate refuses to replace that entry, and the policy
// holds h), and with a file every use of the key reads it.
//
// That gate cannot cover an entry of another key with the same 64-bit hash
// (two live keys colliding: about n²/2⁶⁵ for n keys, 3 in a million at ten
// million keys) offered before the removal: if its first Set is still
// queued, the walk below offers it a second time, and it can end as above,
// a cold entry held by the cache. That is accepted: nothing is counted
// twice or lost (the shard map stays the truth, every count lives in the
// entry, and hotWindows was added once, when the first Set was taken, and
// subtracted once, when spill marked it cold), and nothing is stranded
// hot outside the cache. The cost is speed for the keys of that one hash:
// once the held entry has left memory, they stay cold (served through the
// shard map and read from the file) until the cache evicts the hash; while
// it is in memory, its next use offers it again, which updates it in place.
func (db *DB) uncache(hs []uint64) {
	if testBeforeUncache != nil {
		testBeforeUncache()
	}
	for _, h := range hs {
		db.cache.Del(h)
		sh := db.shard(h)
		sh.mu.Lock()
		if sh.uncaching[h]--; sh.uncaching[h] <= 0 {
			delete(sh.uncaching, h)
		}
		for e := sh.m[h]; e != nil; {
			next := e.next // spillLocked may unlink e
			if e.hot.Load() && !db.cache.Set(h, e, 1) {
				db.spillLocked(sh, h, e)
			}
			e = next
		}
		sh.mu.Unlock()
	}
}

// testBeforeUncache, when set by a test, runs after entries left memory
// and before the cache forgets them.
var testBeforeUncache func()

// dropIfClean takes a cold entry out of memory if the file holds its state.
func (db *DB) dropIfClean(e *entry) {
	h := e.s.hash(e.key)
	sh := db.shard(h)
	sh.mu.Lock()
	e.mu.Lock()
	if !e.gone && !e.hot.Load() && !e.dirty {
		db.dropAfterCommit(sh, h, e)
	}
	e.mu.Unlock()
	sh.mu.Unlock()
}

// spill is the cache's eviction and rejection callback: e is no longer (or
// never was) held by the cache. With a file, e leaves memory once the file
// holds its state; until then, and in memory-only mode, it stays in its shard
// as a cold entry, so no count is ever lost. It runs on the cache's goroutine.
func (db *DB) spill(e *entry) {
	if e == nil || db.shutdown.Load() {
		return
	}
	h := e.s.hash(e.key)
	sh := db.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	db.spillLocked(sh, h, e)
}

// spillLocked marks e, which the cache does not hold, cold, and takes it out
// of memory if the file holds its state. sh.mu held.
func (db *DB) spillLocked(sh *shard, h uint64, e *entry) {
	if e.gone || !e.hot.Load() {
		return
	}
	e.hot.Store(false)
	db.hotWindows.Add(-1)
	db.stats.spilled.Add(1)
	if !db.persist {
		return
	}
	e.mu.Lock()
	if !e.dirty {
		db.dropAfterCommit(sh, h, e)
	}
	e.mu.Unlock()
}
