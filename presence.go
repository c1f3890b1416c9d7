package ratedb

import (
	"errors"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/ratedb/ratedb/internal/siphash"
	bolt "go.etcd.io/bbolt"
)

// The presence filter answers, without reading the file, that a window is
// not in it. A key the DB has not seen before (a flood of new keys, or any
// first hit) would otherwise cost a bbolt read transaction, a B+tree
// descent and a block's checksum to learn that nothing is there: a third of
// the CPU of a flood of 5,000,000 new keys.
//
// It is a blocked Bloom filter over the file's window hashes (layout.Hash of
// the record key, under the file's secret): two bits of one 64-bit word per
// window. It may say a window is there when it is not (a read that finds
// nothing, as without the filter), never the reverse:
//
//   - Every block a write transaction puts sets the bits of all its windows
//     (those it carries over included) in the filter in use and in the one
//     being built, before it commits.
//   - A build registers its filter (under snapMu, so no write is under way)
//     and then reads every block, in read transactions of a few hundred
//     blocks. A window in the file when the build ends was either put after
//     the registration (its bits are set) or sits in a block unchanged since
//     before it, which the build reads. A block it cannot decode keeps its
//     range of hashes on a short list that always answers "maybe".
//   - A look-up consults the filter only for a key not in memory, and a
//     window leaves memory only after the commit that wrote it: the filter
//     the look-up loads is the one that commit set bits in, or a later one.
//   - A rebuild of a damaged file drops both filters (snapMu and boltMu
//     held); a build of the old file is then discarded.
//
// Bits are never cleared: windows the janitor removes leave stale bits,
// which only cost a read. A filter is rebuilt once a quarter of its bits are
// set (sized for twice the file's windows: it grows while it is built), or
// at the file's size when the file has shrunk to an eighth of what the
// filter was sized for.

// presence is one presence filter. Its words are read and set atomically;
// damaged is fixed before it is published.
type presence struct {
	secret  siphash.Key // the file's hash key when it was registered
	words   []atomic.Uint64
	shift   uint         // 64 - log2(len(words)): a hash's top bits pick its word
	sized   int64        // windows it was sized for
	set     atomic.Int64 // bits set
	damaged [][2]uint64  // [from, to] hash ranges of blocks the build could not read, sorted
}

// Sizing: presenceBitsPerWindow bits a window at least (rounded up to a
// power of two, so 12 to 24 bits: 1.5 to 3 bytes); at least
// presenceMinWords words.
const (
	presenceBitsPerWindow = 12
	presenceMinWords      = 1 << 10 // 8 KiB
)

// newPresence returns an empty filter for windows windows, under secret.
func newPresence(secret siphash.Key, windows int64) *presence {
	n := presenceMinWords
	for int64(n)*64 < max(windows, 0)*presenceBitsPerWindow {
		n <<= 1
	}
	return &presence{
		secret: secret,
		words:  make([]atomic.Uint64, n),
		shift:  uint(64 - bits.TrailingZeros64(uint64(n))),
		sized:  windows,
	}
}

// mask returns the word of h and h's two bits in it: the word from h's top
// bits, the bits from its lowest twelve.
func (p *presence) mask(h uint64) (*atomic.Uint64, uint64) {
	return &p.words[h>>p.shift], 1<<(h&63) | 1<<(h>>6&63)
}

// add records that a window of hash h is in the file.
func (p *presence) add(h uint64) {
	w, m := p.mask(h)
	if old := w.Load(); old&m == m {
		return
	}
	if old := w.Or(m); old&m != m {
		p.set.Add(int64(bits.OnesCount64(m &^ old)))
	}
}

// mayContain reports whether a window of hash h may be in the file: false
// means it is not.
func (p *presence) mayContain(h uint64) bool {
	w, m := p.mask(h)
	if w.Load()&m == m {
		return true
	}
	if len(p.damaged) == 0 {
		return false
	}
	i, _ := slices.BinarySearchFunc(p.damaged, h, func(r [2]uint64, h uint64) int {
		switch {
		case r[1] < h:
			return -1
		case r[0] > h:
			return 1
		}
		return 0
	})
	return i < len(p.damaged) && p.damaged[i][0] <= h && h <= p.damaged[i][1]
}

// bytes is the filter's size in bytes.
func (p *presence) bytes() int64 { return 8 * int64(len(p.words)) }

// full reports whether a quarter of p's bits are set: a false "maybe" for
// about one absent key in sixteen.
func (p *presence) full() bool { return p.set.Load() > int64(len(p.words))*64/4 }

// stale reports whether p should be rebuilt for a file of windows windows:
// it is full, or the file has shrunk below an eighth of its size.
func (p *presence) stale(windows int64) bool {
	return p.full() || (len(p.words) > presenceMinWords && windows < p.sized/8)
}

// presenceMarks returns the filters a write transaction must set bits in:
// the one in use and the one being built (either may be nil). snapMu held.
func (db *DB) presenceMarks() [2]*presence {
	return [2]*presence{db.presence.Load(), db.presenceNext.Load()}
}

// dropPresence forgets both filters: the file they describe is being
// replaced. snapMu and boltMu held.
func (db *DB) dropPresence() {
	db.presence.Store(nil)
	db.presenceNext.Store(nil)
	db.stats.presenceBytes.Store(0)
}

// errFileReplaced stops a build whose file a rebuild replaced.
var errFileReplaced = errors.New("ratedb: file replaced")

// presenceChunk is how many blocks a build reads per read transaction (a
// variable only so that tests can make it small).
var presenceChunk = 512

// testPresenceChunkHook, when set by a test, runs between the read
// transactions of a build.
var testPresenceChunkHook func()

// maybeBuildPresence starts a build of the presence filter on its own
// goroutine if the file has none, or a stale one, and no build is under
// way. It is called after background snapshots and those a call waiting
// for room in memory runs, and by look-ups that find the filter full; the
// build counts as a call in flight, so Close waits for it (it stops at its
// next chunk).
func (db *DB) maybeBuildPresence() {
	if !db.persist || db.presenceNext.Load() != nil || db.building.Load() {
		return
	}
	p := db.presence.Load()
	if p != nil && !p.stale(db.stats.diskWindows.Load()) {
		return
	}
	// A filter that filled up is replaced by one for twice the file's
	// windows: the file grows while the build reads it.
	grow := p != nil && p.full()
	if !db.building.CompareAndSwap(false, true) {
		return
	}
	if !db.enter(0) {
		db.building.Store(false)
		return
	}
	go func() {
		defer db.exit(0)
		defer db.building.Store(false)
		db.buildPresence(grow)
	}()
}

// buildPresence builds a presence filter for the file (sized for twice its
// windows if grow) and puts it in use, unless Close begins or the file is
// replaced meanwhile. See the comment at the top of this file for why it
// misses no window.
func (db *DB) buildPresence(grow bool) {
	db.snapMu.Lock()
	bdb := db.bolt
	if bdb == nil || db.fileErr != nil {
		db.snapMu.Unlock()
		return
	}
	windows := db.stats.diskWindows.Load()
	if grow {
		windows *= 2
	}
	p := newPresence(db.secret, windows)
	db.presenceNext.Store(p)
	db.snapMu.Unlock()
	abandon := func() {
		db.snapMu.Lock()
		db.presenceNext.CompareAndSwap(p, nil)
		db.snapMu.Unlock()
	}

	var (
		after []byte // the last block key read
		blk   record.Block
		more  = true
	)
	for more {
		if testPresenceChunkHook != nil {
			testPresenceChunkHook()
		}
		if db.closing.Load() || db.presenceNext.Load() != p {
			abandon()
			return
		}
		err := db.view(func(tx *bolt.Tx) error {
			if db.bolt != bdb {
				more = false
				return errFileReplaced
			}
			bb := tx.Bucket(layout.BucketBlocks)
			if bb == nil {
				return errMissingBucket
			}
			c := bb.Cursor()
			var k, v []byte
			if after == nil {
				k, v = c.First()
			} else if k, v = c.Seek(after); k != nil && string(k) == string(after) {
				k, v = c.Next()
			}
			for n := 0; n < presenceChunk; n++ {
				if k == nil {
					more = false
					return nil
				}
				if err := record.DecodeBlock(&blk, k, v); err != nil {
					// Its keys cannot be read: the hashes it would hold
					// (from its key, or from 0 for the first block, up to
					// the next block's key) always answer "maybe". A
					// damaged key that breaks the order makes every
					// hash answer "maybe".
					from, to := layout.KeyH(k), uint64(math.MaxUint64)
					if after == nil {
						from = 0
					}
					if nk, _ := c.Next(); nk != nil {
						to = layout.KeyH(nk) - 1
						c.Prev()
					}
					if to < from || len(k) != 8 || (len(p.damaged) > 0 && from <= p.damaged[len(p.damaged)-1][1]) {
						from, to = 0, math.MaxUint64
						p.damaged = p.damaged[:0]
					}
					p.damaged = append(p.damaged, [2]uint64{from, to})
				} else {
					for i := range blk.Windows {
						p.add(layout.Hash(p.secret, blk.Windows[i].Key))
					}
				}
				after = append(after[:0], k...)
				k, v = c.Next()
			}
			return nil
		})
		if err != nil {
			abandon()
			return
		}
	}

	db.snapMu.Lock()
	defer db.snapMu.Unlock()
	if db.presenceNext.Load() != p || db.bolt != bdb {
		db.presenceNext.CompareAndSwap(p, nil)
		return
	}
	db.presence.Store(p)
	db.presenceNext.Store(nil)
	db.stats.presenceBytes.Store(p.bytes())
}
