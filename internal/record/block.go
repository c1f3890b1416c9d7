package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
)

// A block packs the windows of a run of record keys into one bbolt value
// (file format ratedb/2): the file keeps blocks, not one element per window.
// The caller orders the windows (ratedb sorts them by a keyed hash of their
// record key, then by the key); this package keeps the order it is given.
//
// Layout, integers as Go's varints (uvarint unsigned, varint zigzag signed):
//
//	version (1) = BlockVersion
//	uvarint   number of windows (at least 1)
//	varint    base: the block's earliest expiry, the least MaxEnd of its windows
//	per window:
//	  uvarint key length (at least 1), then the record key
//	  byte    number of tiers (1 to MaxTiers)
//	  per tier: uvarint count, varint end - base (wrapping)
//	CRC-32C of the block's bbolt key || everything before it (4, big endian)
//
// A window of a 25-byte record key (a 16-byte key and a Window's 9-byte
// prefix) with one tier whose end is the block's base takes 29 bytes plus its
// count's varint.

// BlockVersion is the format version of a block.
const BlockVersion = 2

// ErrBlock is returned by DecodeBlock and FindInBlock for a block whose
// checksum holds but whose structure does not (a bug, not damage, or a
// crafted value).
var ErrBlock = errors.New("record: malformed block")

// BlockWindow is one window of a block: its record key and the counters of
// its tiers.
type BlockWindow struct {
	Key      []byte
	Counters []Counter
}

// Block is a decoded block. Reuse one across DecodeBlock calls to decode
// without allocating once its slices have grown; the keys of its windows
// alias the encoded block.
type Block struct {
	Windows []BlockWindow
	MinEnd  int64 // the least MaxEnd of its windows
	cs      []Counter
}

// MinEnd returns the least MaxEnd of ws: the block's earliest expiry.
func MinEnd(ws []BlockWindow) int64 {
	m := int64(math.MaxInt64)
	for i := range ws {
		m = min(m, MaxEnd(ws[i].Counters))
	}
	return m
}

// WindowLen is the encoded length of one window of a block whose base is
// base.
func WindowLen(key []byte, cs []Counter, base int64) int {
	n := uvarintLen(uint64(len(key))) + len(key) + 1
	for _, c := range cs {
		n += uvarintLen(uint64(c.Count)) + varintLen(c.End-base)
	}
	return n
}

// BlockLen is the encoded length of a block holding ws.
func BlockLen(ws []BlockWindow) int {
	base := MinEnd(ws)
	n := 1 + uvarintLen(uint64(len(ws))) + varintLen(base) + 4
	for i := range ws {
		n += WindowLen(ws[i].Key, ws[i].Counters, base)
	}
	return n
}

// AppendBlock appends the encoding of the block holding ws (at least one
// window, each with 1 to MaxTiers counters and a non-empty key) stored under
// the bbolt key blockKey to dst.
func AppendBlock(dst, blockKey []byte, ws []BlockWindow) []byte {
	start := len(dst)
	base := MinEnd(ws)
	dst = append(dst, BlockVersion)
	dst = binary.AppendUvarint(dst, uint64(len(ws)))
	dst = binary.AppendVarint(dst, base)
	for i := range ws {
		w := &ws[i]
		dst = binary.AppendUvarint(dst, uint64(len(w.Key)))
		dst = append(dst, w.Key...)
		dst = append(dst, byte(len(w.Counters)))
		for _, c := range w.Counters {
			dst = binary.AppendUvarint(dst, uint64(c.Count))
			dst = binary.AppendVarint(dst, c.End-base)
		}
	}
	sum := crc32.Update(crc32.Checksum(blockKey, castagnoli), castagnoli, dst[start:])
	return binary.BigEndian.AppendUint32(dst, sum)
}

// blockBody checks v's version and checksum and returns the bytes between
// them, with the window count and base read.
func blockBody(blockKey, v []byte) (body []byte, n int, base int64, err error) {
	if len(v) < 1+1+1+4 {
		return nil, 0, 0, ErrShort
	}
	if v[0] != BlockVersion {
		return nil, 0, 0, ErrVersion
	}
	all := v[:len(v)-4]
	sum := crc32.Update(crc32.Checksum(blockKey, castagnoli), castagnoli, all)
	if sum != binary.BigEndian.Uint32(v[len(v)-4:]) {
		return nil, 0, 0, ErrChecksum
	}
	p := all[1:]
	cnt, k := binary.Uvarint(p)
	if k <= 0 || cnt == 0 || cnt > uint64(len(p)) {
		return nil, 0, 0, ErrBlock
	}
	p = p[k:]
	base, k = binary.Varint(p)
	if k <= 0 {
		return nil, 0, 0, ErrBlock
	}
	return p[k:], int(cnt), base, nil
}

// nextWindow reads the key and tier count of the window at the start of p.
func nextWindow(p []byte) (key, rest []byte, tiers int, err error) {
	kl, k := binary.Uvarint(p)
	if k <= 0 || kl == 0 || kl >= uint64(len(p)-k) {
		return nil, nil, 0, ErrBlock
	}
	p = p[k:]
	key, p = p[:kl:kl], p[kl:]
	tiers = int(p[0])
	if tiers < 1 || tiers > MaxTiers {
		return nil, nil, 0, ErrTiers
	}
	return key, p[1:], tiers, nil
}

// nextCounter reads one tier at the start of p.
func nextCounter(p []byte, base int64) (c Counter, rest []byte, err error) {
	cnt, k := binary.Uvarint(p)
	if k <= 0 {
		return c, nil, ErrBlock
	}
	if cnt > math.MaxInt64 {
		return c, nil, ErrCount
	}
	p = p[k:]
	d, k := binary.Varint(p)
	if k <= 0 {
		return c, nil, ErrBlock
	}
	return Counter{Count: int64(cnt), End: base + d}, p[k:], nil
}

// DecodeBlock decodes the block v, stored under blockKey, into b. It checks
// the version, the checksum and the structure, and never panics (it is
// fuzzed). On an error b holds no windows.
func DecodeBlock(b *Block, blockKey, v []byte) error {
	b.Windows, b.cs = b.Windows[:0], b.cs[:0]
	err := decodeBlock(b, blockKey, v)
	if err != nil {
		b.Windows, b.cs = b.Windows[:0], b.cs[:0]
	}
	return err
}

func decodeBlock(b *Block, blockKey, v []byte) error {
	p, n, base, err := blockBody(blockKey, v)
	if err != nil {
		return err
	}
	minEnd := int64(math.MaxInt64)
	for range n {
		var (
			key   []byte
			tiers int
		)
		if key, p, tiers, err = nextWindow(p); err != nil {
			return err
		}
		start := len(b.cs)
		for range tiers {
			var c Counter
			if c, p, err = nextCounter(p, base); err != nil {
				return err
			}
			b.cs = append(b.cs, c)
		}
		// If b.cs grows later, these counters stay in the array they
		// were written to: still correct, never written again.
		cs := b.cs[start:len(b.cs):len(b.cs)]
		b.Windows = append(b.Windows, BlockWindow{Key: key, Counters: cs})
		minEnd = min(minEnd, MaxEnd(cs))
	}
	if len(p) != 0 || minEnd != base {
		return ErrBlock
	}
	b.MinEnd = base
	return nil
}

// BlockHeader checks the block v, stored under blockKey, as DecodeBlock
// does, and returns its number of windows and its earliest expiry.
func BlockHeader(blockKey, v []byte) (n int, minEnd int64, err error) {
	var b Block
	if err := DecodeBlock(&b, blockKey, v); err != nil {
		return 0, 0, err
	}
	return len(b.Windows), b.MinEnd, nil
}

// ClaimedWindows returns the number of windows the header of v claims,
// without checking anything else: for the accounting of a damaged block.
// It returns 0 if v has no readable header.
func ClaimedWindows(v []byte) int {
	if len(v) < 2 {
		return 0
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || n > uint64(len(v)) {
		return 0
	}
	return int(n)
}

// FindInBlock checks the block v, stored under blockKey, as DecodeBlock
// does (the whole block, also past the window it finds), and decodes the
// counters of the window whose record key is key into dst[:0]. found is
// false if the block holds no such window. It returns an error for every
// block DecodeBlock rejects, so that a look-up never reads a window of a
// block the rest of ratedb treats as damaged. It does not allocate unless
// dst is too small.
func FindInBlock(dst []Counter, blockKey, v, key []byte) (cs []Counter, found bool, err error) {
	p, n, base, err := blockBody(blockKey, v)
	if err != nil {
		return dst[:0], false, err
	}
	dst = dst[:0]
	minEnd := int64(math.MaxInt64)
	for range n {
		var (
			k     []byte
			tiers int
		)
		if k, p, tiers, err = nextWindow(p); err != nil {
			return dst[:0], false, err
		}
		// The first window of the key is the one found, as DecodeBlock
		// keeps the windows in order.
		match := !found && bytes.Equal(k, key)
		var maxEnd int64
		for i := range tiers {
			var c Counter
			if c, p, err = nextCounter(p, base); err != nil {
				return dst[:0], false, err
			}
			if i == 0 || c.End > maxEnd {
				maxEnd = c.End // as MaxEnd
			}
			if match {
				dst = append(dst, c)
			}
		}
		found = found || match
		minEnd = min(minEnd, maxEnd)
	}
	if len(p) != 0 || minEnd != base {
		return dst[:0], false, ErrBlock
	}
	return dst, found, nil
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

func varintLen(x int64) int {
	ux := uint64(x) << 1
	if x < 0 {
		ux = ^ux
	}
	return uvarintLen(ux)
}
