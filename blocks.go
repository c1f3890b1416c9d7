package ratedb

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/ratedb/ratedb/internal/siphash"
	bolt "go.etcd.io/bbolt"
)

// The file packs windows into blocks (see internal/layout): a snapshot
// rewrites the few thousand blocks its changed windows fall in, not one
// B+tree element per window, and the janitor finds expired windows through
// the earliest expiry of each block, kept in memory (blockIndex), instead of
// an expiry index in the file.

// defaultMaxBlockBytes is the size, in bytes, past which a block is split
// into blocks of about half of it, and against which the janitor merges the
// blocks it leaves small (see mergeBelowDiv): about 34 windows of 16-byte
// keys. Four to eight blocks share a 4 KiB bbolt page, so bbolt can split a
// page whose blocks grow (it never splits a page of four elements or
// fewer). BenchmarkDB_Snapshot's leaf-fill-%: 93% (73% with blocks of up to
// 1,900 bytes).
const defaultMaxBlockBytes = 1000

// blockCapOverride, when positive, replaces defaultMaxBlockBytes, so that
// tests can make blocks small. It is atomic: a DB another test left open
// may still be writing blocks when a test sets it.
var blockCapOverride atomic.Int64

// maxBlockBytes returns the block cap in force.
func maxBlockBytes() int {
	if n := blockCapOverride.Load(); n > 0 {
		return int(n)
	}
	return defaultMaxBlockBytes
}

// blockFill is the fill percent of the blocks bucket's pages: blocks are
// rewritten in place, so bbolt's default of half-full pages would double
// the file.
const blockFill = 0.95

// errMissingBucket is returned when a transaction finds no blocks bucket.
var errMissingBucket = fmt.Errorf("%w: missing bucket", ErrCorrupt)

// blockInfo is what the janitor and the window count need of one block.
type blockInfo struct {
	minEnd int64 // the least MaxEnd of its windows; math.MinInt64 for a damaged block
	n      int64 // its windows (for a damaged block, as its header claims)
}

// blockIndex holds a blockInfo per block of the file, by block key. It is
// read and changed with snapMu held, and changed only after the transaction
// that wrote the blocks commits (blockEdit).
type blockIndex map[uint64]blockInfo

// blockEdit is one change to a blockIndex.
type blockEdit struct {
	key  uint64
	info blockInfo
	del  bool
}

// apply applies edits in order.
func (x blockIndex) apply(edits []blockEdit) {
	for _, e := range edits {
		if e.del {
			delete(x, e.key)
		} else {
			x[e.key] = e.info
		}
	}
}

// indexBlock adds the block v, stored under k, to x: the audit after Open
// calls it for every block it reads. A damaged block is filed as due now,
// so that the next janitor pass deletes it, with the window count its
// header claims, which the file's count includes.
func (x blockIndex) indexBlock(k, v []byte) {
	n, minEnd, err := record.BlockHeader(k, v)
	if err != nil {
		x[layout.KeyH(k)] = blockInfo{minEnd: math.MinInt64, n: int64(record.ClaimedWindows(v))}
		return
	}
	x[layout.KeyH(k)] = blockInfo{minEnd: minEnd, n: int64(n)}
}

// putCount records the file's window count, n, in its meta bucket.
func putCount(tx *bolt.Tx, n int64) error {
	mb := tx.Bucket(layout.BucketMeta)
	if mb == nil {
		return errMissingBucket
	}
	return mb.Put(layout.KeyCount, record.EncodeInt64(n))
}

// change is one window to write: its hash, its record key (klen bytes at
// koff of its changeSet's keys) and its counters (cn of them at coff of its
// changeSet's counters), cn == 0 to delete the window. It is kept small (32
// bytes) and holds no pointer but its entry: a snapshot sorts a million of
// them, and the garbage collector scans them.
type change struct {
	e     *entry // the entry it was copied from (snapshots only)
	h     uint64 // layout.Hash of the record key
	koff  int
	coff  uint32
	klen  uint16
	cn    uint8
	flags uint8 // changeLowered, changeCold
}

// The flags of a change copied from an entry.
const (
	changeLowered = 1 << iota // the entry's lowered bit, cleared by the copy: restored if the write fails
	changeCold                // the entry was cold when copied: it leaves memory once the copy commits
)

// tombstone reports whether the change deletes the window.
func (c *change) tombstone() bool { return c.cn == 0 }

// changeSet is the changes of one write, with the record keys and counters
// they point into.
type changeSet struct {
	changes []change
	keys    []byte
	cs      []counter
	tmp     []change // sort's scratch space, cleared after each use
}

// add appends a change of the record key prefix+key (hashed under secret)
// with counters cs (none: delete the window) and returns it.
func (s *changeSet) add(secret siphash.Key, prefix []byte, key string, cs []counter) *change {
	c := s.addHashed(0, prefix, key, cs)
	c.h = layout.Hash(secret, s.key(c))
	return c
}

// addHashed is add for a record key whose hash h is known.
func (s *changeSet) addHashed(h uint64, prefix []byte, key string, cs []counter) *change {
	c := change{h: h, koff: len(s.keys), coff: uint32(len(s.cs)), klen: uint16(len(prefix) + len(key)), cn: uint8(len(cs))}
	s.keys = append(append(s.keys, prefix...), key...)
	s.cs = append(s.cs, cs...)
	s.changes = append(s.changes, c)
	return &s.changes[len(s.changes)-1]
}

// key returns c's record key.
func (s *changeSet) key(c *change) []byte {
	end := c.koff + int(c.klen)
	return s.keys[c.koff:end:end]
}

// counters returns c's counters.
func (s *changeSet) counters(c *change) []counter {
	end := c.coff + uint32(c.cn)
	return s.cs[c.coff:end:end]
}

// touchKeys reads the first byte of each change's record key, and its first
// counter, before the merge compares and copies them: sorting scattered the
// changes away from their keys and counters, and the reads miss the cache
// together instead of in turn.
func (s *changeSet) touchKeys(cs []change) {
	n := 0
	for i := range cs {
		if cs[i].klen > 0 {
			n += int(s.keys[cs[i].koff])
		}
		if cs[i].cn > 0 {
			n += int(s.cs[cs[i].coff].End)
		}
	}
	runtime.KeepAlive(n)
}

// compare orders changes as the file orders windows: by hash, then record
// key.
func (s *changeSet) compare(a, b *change) int {
	if a.h != b.h {
		return cmp.Compare(a.h, b.h)
	}
	return bytes.Compare(s.key(a), s.key(b))
}

// radixMin is the smallest set of changes that sort buckets by radix
// before sorting each bucket.
const radixMin = 1 << 12

// sort sorts s.changes by s.compare. A large set is first ordered by the top
// 16 bits of h in two stable scatter passes of 8 bits each (a least
// significant digit radix sort, through s.tmp): h is a keyed hash, so the
// runs of equal top bits are short and even, and each is then sorted by
// comparison. The scatter passes read in order and write to 256 streams,
// which the memory system overlaps; an in-place permutation would wait for
// each of a million cache misses in turn.
func (s *changeSet) sort() {
	changes := s.changes
	if len(changes) < radixMin {
		s.sortRun(changes)
		return
	}
	if cap(s.tmp) < len(changes) {
		s.tmp = make([]change, len(changes))
	}
	tmp := s.tmp[:len(changes)]
	scatter(tmp, changes, 48)
	scatter(changes, tmp, 56)
	clear(tmp) // it holds entry pointers
	for i := 0; i < len(changes); {
		top := changes[i].h >> 48
		j := i + 1
		for j < len(changes) && changes[j].h>>48 == top {
			j++
		}
		if j-i > 1 {
			s.sortRun(changes[i:j])
		}
		i = j
	}
}

// insertionMax is the longest run sortRun sorts by insertion.
const insertionMax = 48

// sortRun sorts a run of changes by s.compare. The runs sort leaves are
// about 16 changes long at a million changes: an insertion sort that
// compares hashes, and keys only for equal hashes, takes a third of the time
// of a generic sort calling compare on copies.
func (s *changeSet) sortRun(cs []change) {
	if len(cs) > insertionMax {
		slices.SortFunc(cs, func(a, b change) int { return s.compare(&a, &b) })
		return
	}
	for i := 1; i < len(cs); i++ {
		x := cs[i]
		j := i
		for ; j > 0 && s.less(&x, &cs[j-1]); j-- {
			cs[j] = cs[j-1]
		}
		cs[j] = x
	}
}

// less reports whether a sorts before b.
func (s *changeSet) less(a, b *change) bool {
	if a.h != b.h {
		return a.h < b.h
	}
	return bytes.Compare(s.key(a), s.key(b)) < 0
}

// scatter copies src into dst (of the same length) ordered by the byte of
// h at bit shift, keeping the order of src among equal bytes.
func scatter(dst, src []change, shift uint) {
	var next [256]int
	for i := range src {
		next[byte(src[i].h>>shift)]++
	}
	sum := 0
	for d, c := range next {
		next[d] = sum
		sum += c
	}
	for i := range src {
		d := byte(src[i].h >> shift)
		dst[next[d]] = src[i]
		next[d]++
	}
}

// blockWriter merges sorted changes into the blocks of one write
// transaction. Its scratch space is reused from block to block; only the
// bytes handed to Put are fresh (from sl), since bbolt keeps them until the
// transaction ends.
type blockWriter struct {
	bb     *bolt.Bucket
	secret siphash.Key
	x      blockIndex // the committed index, for the size of a damaged block
	sl     *slab
	marks  [2]*presence // presence filters to record every window put in (nil: none)

	edits   []blockEdit
	delta   int64 // windows added minus windows removed
	written int64 // bytes of blocks put
	corrupt int64 // damaged blocks met

	old    record.Block
	merged []record.BlockWindow
	mh     []uint64
	sizes  []int
}

func newBlockWriter(tx *bolt.Tx, secret siphash.Key, x blockIndex, sl *slab) (*blockWriter, error) {
	bb := tx.Bucket(layout.BucketBlocks)
	if bb == nil {
		return nil, errMissingBucket
	}
	bb.FillPercent = blockFill
	return &blockWriter{bb: bb, secret: secret, x: x, sl: sl}, nil
}

// write merges changes, a run of set.changes sorted by set.compare, into
// the blocks they fall in.
//
// It stops at the first block boundary after putting budget bytes of blocks
// and returns how many of changes it wrote: a transaction's memory (bbolt
// keeps every block put, and copies every page it touches, until the
// transaction ends) grows with the blocks touched, which sparse changes in a
// large file make many per change.
func (w *blockWriter) write(set *changeSet, changes []change, budget int64) (int, error) {
	c := w.bb.Cursor()
	for i := 0; i < len(changes); {
		if w.written >= budget {
			return i, nil
		}
		// Seek from the root for each block: the Puts of the last one
		// leave the cursor's position stale.
		k, v := layout.SeekBlock(c, changes[i].h)
		key := layout.KeyH(k)
		if k == nil {
			// No block at or below h: the first block, if any, takes the
			// changes under key 0.
			k, v = c.First()
			key = 0
		}
		j := len(changes)
		if k != nil {
			if nk, _ := c.Next(); nk != nil {
				next := layout.KeyH(nk)
				j = i
				for j < len(changes) && changes[j].h < next {
					j++
				}
				// Keys of 8 bytes are strictly ordered; only a damaged
				// key of another length can read as h again.
				j = max(j, i+1)
			}
		}
		set.touchKeys(changes[i:j])
		if err := w.merge(key, k, v, set, changes[i:j]); err != nil {
			return 0, err
		}
		i = j
	}
	return len(changes), nil
}

// merge writes the block of key, whose current bbolt key and value are
// oldKey and v (nil: no block yet), merged with changes.
func (w *blockWriter) merge(key uint64, oldKey, v []byte, set *changeSet, changes []change) error {
	old := &w.old
	old.Windows = old.Windows[:0]
	var oldN int64
	if v != nil {
		if err := record.DecodeBlock(old, oldKey, v); err != nil {
			// Its windows are lost: the changes replace it.
			w.corrupt++
			oldN = w.x[layout.KeyH(oldKey)].n
		} else {
			oldN = int64(len(old.Windows))
		}
	}
	// An old window's hash is computed only when the order needs it: a
	// window whose key is the next change's is replaced by it, and a
	// snapshot of windows that all changed hashes no old key.
	var (
		oldH   uint64
		hashed = -1 // the old window whose hash oldH is
	)
	merged, mh := w.merged[:0], w.mh[:0]
	a, b := 0, 0
	for a < len(old.Windows) || b < len(changes) {
		d := 0
		switch {
		case b == len(changes):
			d = -1
		case a == len(old.Windows):
			d = 1
		case bytes.Equal(old.Windows[a].Key, set.key(&changes[b])):
			d = 0
		default:
			if hashed != a {
				oldH, hashed = layout.Hash(w.secret, old.Windows[a].Key), a
			}
			d = cmp.Compare(oldH, changes[b].h)
			if d == 0 {
				d = bytes.Compare(old.Windows[a].Key, set.key(&changes[b]))
			}
		}
		if d < 0 {
			if hashed != a {
				oldH, hashed = layout.Hash(w.secret, old.Windows[a].Key), a
			}
			merged, mh = append(merged, old.Windows[a]), append(mh, oldH)
			a++
			continue
		}
		ch := &changes[b]
		b++
		if d == 0 {
			a++
			if ch.tombstone() {
				continue
			}
		} else if ch.tombstone() {
			continue
		}
		merged = append(merged, record.BlockWindow{Key: set.key(ch), Counters: set.counters(ch)})
		mh = append(mh, ch.h)
	}
	w.merged, w.mh = merged, mh
	w.delta += int64(len(merged)) - oldN
	if oldKey != nil && (len(merged) == 0 || layout.KeyH(oldKey) != key) {
		if err := w.bb.Delete(oldKey); err != nil {
			return err
		}
		w.edits = append(w.edits, blockEdit{key: layout.KeyH(oldKey), del: true})
	}
	return w.put(key, merged, mh)
}

// put writes ws (hashes hs) as one block under key, or as several if they
// exceed maxBlockBytes(): blocks of about half of it, each after the first
// under the hash of its first window. Windows of equal hash stay together.
func (w *blockWriter) put(key uint64, ws []record.BlockWindow, hs []uint64) error {
	if len(ws) == 0 {
		return nil
	}
	base := record.MinEnd(ws)
	sizes, total := w.sizes[:0], 0
	for i := range ws {
		n := record.WindowLen(ws[i].Key, ws[i].Counters, base)
		sizes = append(sizes, n)
		total += n
	}
	w.sizes = sizes
	parts := 1
	if limit := maxBlockBytes(); total > limit {
		parts = (2*total + limit - 1) / limit
	}
	target := (total + parts - 1) / parts
	start, acc := 0, 0
	for i := range ws {
		acc += sizes[i]
		last := i == len(ws)-1
		if !last && (acc < target || hs[i+1] == hs[i]) {
			continue
		}
		k := key
		if start > 0 {
			k = hs[start]
		}
		if err := w.putOne(k, ws[start:i+1], hs[start:i+1]); err != nil {
			return err
		}
		start, acc = i+1, 0
	}
	return nil
}

// delete deletes the block of key.
func (w *blockWriter) delete(key uint64) error {
	kb := layout.BlockKey(key)
	if err := w.bb.Delete(kb[:]); err != nil {
		return err
	}
	w.edits = append(w.edits, blockEdit{key: key, del: true})
	return nil
}

// putOne writes ws (of hashes hs, or nil to compute them) as the block of
// key, and records its windows in the presence filters.
func (w *blockWriter) putOne(key uint64, ws []record.BlockWindow, hs []uint64) error {
	if w.marks != [2]*presence{} {
		for i := range ws {
			var h uint64
			if hs != nil {
				h = hs[i]
			} else {
				h = layout.Hash(w.secret, ws[i].Key)
			}
			for _, p := range w.marks {
				if p != nil {
					p.add(h)
				}
			}
		}
	}
	kb := w.sl.alloc(8)
	binary.BigEndian.PutUint64(kb, key)
	vb := w.sl.alloc(record.BlockLen(ws))
	record.AppendBlock(vb[:0], kb, ws)
	if err := w.bb.Put(kb, vb); err != nil {
		return err
	}
	w.written += int64(len(kb) + len(vb))
	w.edits = append(w.edits, blockEdit{key: key, info: blockInfo{minEnd: record.MinEnd(ws), n: int64(len(ws))}})
	return nil
}
