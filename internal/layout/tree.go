package layout

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// CheckTree checks, through its own reads of r (a bbolt file of pages
// pages of pageSize bytes), that the pages reached from roots form trees:
// every page linked lies in [2, pages) with its overflow, names its own
// id, is a branch or a leaf page, holds no more elements than fit, and is
// reached only once. It reads branch pages whole and only the 16-byte
// header of leaf pages, level by level in page order, and does not follow
// the bucket roots that leaves hold (give those as roots).
//
// bbolt follows page links without checking them: a link back to a page on
// the path makes its cursor recurse until the goroutine's stack overflows
// (Seek, a bucket look-up) or walk the same pages forever (ForEach), fatal
// errors that no recover catches. A tree that passes cannot make it do
// either, except through a bucket stored inline in one of its leaves,
// whose page has no id: DamagedInline checks those. The page audit checks all of this and more, but reads every
// byte of every page; CheckTree reads about 16 bytes of most pages.
//
// The error wraps ErrDamaged, or is r's read error.
func CheckTree(r io.ReaderAt, pageSize int64, pages uint64, roots ...uint64) error {
	const (
		hdrLen  = 16   // id, flags, count, overflow
		elemLen = 16   // a branch element: pos, ksize, child id
		branch  = 0x01 // bbolt's page flags
		leaf    = 0x02
	)
	le := binary.LittleEndian
	seen := make([]uint64, (pages+63)/64)
	var (
		hdr [hdrLen]byte
		buf []byte
	)
	level := slices.Clone(roots)
	for len(level) > 0 {
		slices.Sort(level)
		var next []uint64
		for _, id := range level {
			if id < 2 || id >= pages {
				return fmt.Errorf("%w: a link to a page out of range", ErrDamaged)
			}
			if _, err := r.ReadAt(hdr[:], int64(id)*pageSize); err != nil {
				return fmt.Errorf("reading a page header: %w", err)
			}
			flags, count, overflow := le.Uint16(hdr[8:]), int64(le.Uint16(hdr[10:])), uint64(le.Uint32(hdr[12:]))
			if le.Uint64(hdr[:]) != id || overflow >= pages-id {
				return fmt.Errorf("%w: a page that is not where its parent says", ErrDamaged)
			}
			for p := id; p <= id+overflow; p++ {
				if seen[p/64]&(1<<(p%64)) != 0 {
					return fmt.Errorf("%w: a page reached twice", ErrDamaged)
				}
				seen[p/64] |= 1 << (p % 64)
			}
			switch flags {
			case leaf:
				continue
			case branch:
			default:
				return fmt.Errorf("%w: a link to a page that is neither a branch nor a leaf", ErrDamaged)
			}
			// Only the elements are read: count is at most 65,535, so a
			// branch read is at most about 1 MiB whatever its overflow.
			n := hdrLen + count*elemLen
			if n > int64(overflow+1)*pageSize {
				return fmt.Errorf("%w: a branch page with more elements than it holds", ErrDamaged)
			}
			if int64(cap(buf)) < n {
				buf = make([]byte, n)
			}
			b := buf[:n]
			if _, err := r.ReadAt(b, int64(id)*pageSize); err != nil {
				return fmt.Errorf("reading a branch page: %w", err)
			}
			for i := range count {
				next = append(next, le.Uint64(b[hdrLen+i*elemLen+8:]))
			}
		}
		level = next
	}
	return nil
}

// DamagedInline returns the names of the buckets that the root bucket's
// tree at root (one CheckTree accepted) holds inline (a bucket value whose
// root page id is 0, followed by its page) with an inline page that is not
// a leaf page. bbolt takes such a page's elements for links, and for an
// inline bucket it reads page 0 as the inline page itself: its cursors
// then recurse (Seek) or loop (First, ForEach) without end, as down any
// other cycle. CheckTree cannot see inline pages (they have no page id).
// An element that does not lie inside its page is skipped: it is the
// page audit's to report.
func DamagedInline(r io.ReaderAt, pageSize int64, root uint64) ([]string, error) {
	const (
		hdrLen     = 16
		elemLen    = 16
		branch     = 0x01
		leaf       = 0x02
		bucketFlag = 0x01 // a leaf element that is a bucket
		bucketHdr  = 16   // root page id, sequence
	)
	le := binary.LittleEndian
	var bad []string
	level := []uint64{root}
	for len(level) > 0 {
		var next []uint64
		for _, id := range level {
			var hdr [hdrLen]byte
			if _, err := r.ReadAt(hdr[:], int64(id)*pageSize); err != nil {
				return nil, fmt.Errorf("reading a page header: %w", err)
			}
			b := make([]byte, int64(le.Uint32(hdr[12:])+1)*pageSize)
			if _, err := r.ReadAt(b, int64(id)*pageSize); err != nil {
				return nil, fmt.Errorf("reading a page: %w", err)
			}
			flags, count := le.Uint16(b[8:]), int(le.Uint16(b[10:]))
			for i := range count {
				off := hdrLen + i*elemLen
				if off+elemLen > len(b) {
					break
				}
				e := b[off:]
				if flags == branch {
					next = append(next, le.Uint64(e[8:]))
					continue
				}
				if flags != leaf || le.Uint32(e)&bucketFlag == 0 {
					continue
				}
				pos, ks, vs := uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
				start := uint64(off) + pos
				if start+ks+vs > uint64(len(b)) {
					continue
				}
				k, v := b[start:start+ks], b[start+ks:start+ks+vs]
				if len(v) < bucketHdr || le.Uint64(v) != 0 {
					continue
				}
				if in := v[bucketHdr:]; len(in) < hdrLen || le.Uint16(in[8:]) != leaf {
					bad = append(bad, string(k))
				}
			}
		}
		level = next
	}
	return bad, nil
}

// CheckTrees checks, before bbolt walks them, the page trees a read
// transaction tx of the file f (open on the same file) can reach: the root
// bucket's first, then the buckets it holds, including those held inline
// (CheckTree, DamagedInline), reading f through a memory map. err is damage
// to the root or meta bucket, without which the file cannot be read at all;
// data is damage to the trees of windows (the blocks bucket, or a ratedb/1
// file's windows and index buckets). Both wrap ErrDamaged, or are read
// errors. A fault reading the map (the file truncated under it) is a
// SIGBUS: call it where debug.SetPanicOnFault turns that into a panic.
func CheckTrees(tx *bolt.Tx, f *os.File) (data, err error) {
	ps := int64(tx.DB().Info().PageSize)
	pages, root := uint64(tx.Size()/ps), uint64(tx.Cursor().Bucket().Root())
	r, unmap := Mapped(f, tx.Size())
	defer unmap()
	if err := CheckTree(r, ps, pages, root); err != nil {
		return nil, fmt.Errorf("the root bucket's pages: %w", err)
	}
	var meta uint64
	var roots []uint64
	for _, name := range [][]byte{BucketMeta, BucketBlocks, LegacyBucketWindows, LegacyBucketIndex} {
		b := tx.Bucket(name)
		if b == nil || b.Root() == 0 { // missing, or inline in its parent
			continue
		}
		if string(name) == string(BucketMeta) {
			meta = uint64(b.Root())
		} else {
			roots = append(roots, uint64(b.Root()))
		}
	}
	if meta != 0 {
		if err := CheckTree(r, ps, pages, meta); err != nil {
			return nil, fmt.Errorf("the meta bucket's pages: %w", err)
		}
	}
	data = CheckTree(r, ps, pages, roots...)
	// An inline bucket's page is no page of the trees above: a branch one
	// links bbolt back to itself (page 0).
	bad, err := DamagedInline(r, ps, root)
	if err != nil {
		return nil, err
	}
	for _, name := range bad {
		if name == string(BucketMeta) {
			return nil, fmt.Errorf("%w: the meta bucket's inline page is not a leaf", ErrDamaged)
		}
		if data == nil {
			data = fmt.Errorf("%w: bucket %q's inline page is not a leaf", ErrDamaged, name)
		}
	}
	return data, nil
}
