package layout

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
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
// either. The page audit checks all of this and more, but reads every
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
