package ratedb

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// A pageAudit walks the B+tree of a bbolt file through its own reads
// (io.ReaderAt), never through bbolt's memory map, and checks the structure
// bbolt trusts without checking: that each page is where its parent says,
// is a branch or a leaf, and holds its elements, keys and values inside its
// own bytes, that no page is reached twice, and (freelist) that no page it
// reached is listed as free.
//
// bbolt checksums only its meta pages. A flipped bit in an element's size
// makes bbolt read a key or value gigabytes long out of its map: reads of it
// fault or return garbage (block checksums catch that), but the first commit
// that rewrites the page copies it, allocating gigabytes, and can take the
// process down. The audit finds such pages before anything is written (see
// DB.auditFile) and rebuild copies every sound block into a fresh file.
//
// Damage is counted per page; a damaged page's elements that lie inside its
// bytes are still walked and reported, since blocks carry checksums.
type pageAudit struct {
	r    io.ReaderAt
	ps   int64  // page size
	pgid uint64 // pages [0, pgid) are in use
	seen []uint64

	// leaf, if set, receives every key and value of a leaf page in a
	// top-level bucket's tree (slices valid only during the call).
	leaf func(bucket string, k, v []byte)
	// visit, if set, receives each page read, before its check.
	visit func(id uint64, bucket string, page []byte)

	damaged int   // pages (or inline buckets) that failed a check
	err     error // a read error: the audit is incomplete
	buf     []byte
}

// maxTreeDepth bounds the walk: a sound tree of a few billion keys is far
// shallower.
const maxTreeDepth = 32

// bbolt's element layout (go.etcd.io/bbolt/internal/common).
const (
	elemSize       = 16  // branch: pos, ksize (uint32), child (uint64); leaf: flags, pos, ksize, vsize (uint32)
	bucketLeafFlag = 0x1 // a leaf element that is a bucket
	bucketHdrSize  = 16  // a bucket value: root (uint64), sequence (uint64), then its inline page if root is 0
)

func newPageAudit(r io.ReaderAt, m bmeta) *pageAudit {
	return &pageAudit{r: r, ps: int64(m.pageSize), pgid: m.pgid, seen: make([]uint64, (m.pgid+63)/64)}
}

// pageRef is a page to check and the top-level bucket whose tree it belongs
// to ("" for the root bucket's own tree); for a page a branch links to, the
// key the branch gives it, which must be its first key (first, hasFirst).
type pageRef struct {
	id       uint64
	bucket   string
	first    string
	hasFirst bool
}

// run walks the whole file from the root bucket's page.
func (a *pageAudit) run(root uint64) {
	a.walk([]pageRef{{id: root}}, 0)
}

// walk checks the pages of level, which lie depth pages below a root, then
// the pages they lead to, level by level. Each level is read in file order,
// so a large file is read mostly front to back, not in key order.
func (a *pageAudit) walk(level []pageRef, depth int) {
	for ; len(level) > 0 && a.err == nil; depth++ {
		if depth > maxTreeDepth {
			a.damaged += len(level)
			return
		}
		slices.SortFunc(level, func(x, y pageRef) int { return cmp.Compare(x.id, y.id) })
		var next []pageRef
		for _, r := range level {
			if next = a.page(r, next); a.err != nil {
				return
			}
		}
		level = next
	}
}

// page checks one page and appends the pages it leads to (its children, and
// the roots of the buckets it holds) to next.
func (a *pageAudit) page(r pageRef, next []pageRef) []pageRef {
	id := r.id
	if id < 2 || id >= a.pgid || a.marked(id) {
		a.damaged++
		return next
	}
	if int64(cap(a.buf)) < a.ps {
		a.buf = make([]byte, a.ps)
	}
	b := a.buf[:a.ps]
	if _, err := a.r.ReadAt(b, int64(id)*a.ps); err != nil {
		a.err = fmt.Errorf("ratedb: reading page: %w", err)
		return next
	}
	overflow := uint64(binary.LittleEndian.Uint32(b[12:]))
	if id+overflow >= a.pgid {
		a.mark(id)
		a.damaged++
		return next
	}
	for p := id; p <= id+overflow; p++ {
		if a.marked(p) {
			a.damaged++
			return next
		}
		a.mark(p)
	}
	if overflow > 0 {
		n := int64(overflow+1) * a.ps
		if int64(cap(a.buf)) < n {
			a.buf = append(make([]byte, 0, n), b...)
		}
		b = a.buf[:n]
		if _, err := a.r.ReadAt(b[a.ps:], int64(id+1)*a.ps); err != nil {
			a.err = fmt.Errorf("ratedb: reading page: %w", err)
			return next
		}
	}
	if a.visit != nil {
		a.visit(id, r.bucket, b)
	}
	// bbolt finds a key by the keys of the branch pages: each is the first
	// key of the page it links to (bbolt keeps them so, and relies on it
	// when it writes the page). A damaged one sends look-ups to the wrong
	// page, where they find nothing, without any other sign.
	ok := !r.hasFirst || firstKeyIs(b, r.first)
	ok = checkPage(b, id, false, func(k, v []byte, flags uint32) bool {
		return a.element(k, v, flags, r.bucket, &next)
	}, func(child uint64, key []byte) {
		next = append(next, pageRef{id: child, bucket: r.bucket, first: string(key), hasFirst: true})
	}) && ok
	if !ok {
		a.damaged++
	}
	return next
}

// firstKeyIs reports whether the first element of the page b, branch or
// leaf, has the key want, lying inside b.
func firstKeyIs(b []byte, want string) bool {
	if len(b) < pageHeader+elemSize || binary.LittleEndian.Uint16(b[10:]) == 0 {
		return false
	}
	e := b[pageHeader:]
	pos, ksize := uint64(binary.LittleEndian.Uint32(e[0:])), uint64(binary.LittleEndian.Uint32(e[4:]))
	if binary.LittleEndian.Uint16(b[8:]) == pageLeaf {
		pos, ksize = uint64(binary.LittleEndian.Uint32(e[4:])), uint64(binary.LittleEndian.Uint32(e[8:]))
	}
	start := uint64(pageHeader) + pos
	return start+ksize <= uint64(len(b)) && string(b[start:start+ksize]) == want
}

// element handles one leaf element of a page in bucket's tree; it reports
// false for one that cannot be in a ratedb file. A bucket's root page goes
// to next.
func (a *pageAudit) element(k, v []byte, flags uint32, bucket string, next *[]pageRef) bool {
	isBucket := flags&bucketLeafFlag != 0
	switch {
	case bucket == "" && !isBucket, bucket != "" && isBucket:
		// The root bucket holds only buckets; ratedb nests none.
		return false
	case isBucket:
		if len(v) < bucketHdrSize {
			return false
		}
		root := binary.LittleEndian.Uint64(v)
		if root != 0 {
			*next = append(*next, pageRef{id: root, bucket: string(k)})
			return true
		}
		inline := v[bucketHdrSize:]
		if len(inline) < pageHeader || !checkPage(inline, 0, true, func(ik, iv []byte, iflags uint32) bool {
			if iflags&bucketLeafFlag != 0 {
				return false
			}
			if a.leaf != nil {
				a.leaf(string(k), ik, iv)
			}
			return true
		}, nil) {
			a.damaged++
		}
		return true
	}
	if a.leaf != nil {
		a.leaf(bucket, k, v)
	}
	return true
}

// freelist checks, after run, the freelist page at id (^0: none): neither
// it nor any page it lists may be a page the walk reached, or bbolt would
// hand a live page out for new data and overwrite it. Each such page counts
// as damaged.
func (a *pageAudit) freelist(id uint64) {
	if a.err != nil || id == ^uint64(0) {
		return
	}
	var hdr [pageHeader]byte
	if id < 2 || id >= a.pgid {
		a.damaged++
		return
	}
	if _, err := a.r.ReadAt(hdr[:], int64(id)*a.ps); err != nil {
		a.err = fmt.Errorf("ratedb: reading page: %w", err)
		return
	}
	overflow := uint64(binary.LittleEndian.Uint32(hdr[12:]))
	if id+overflow >= a.pgid {
		a.damaged++
		return
	}
	for p := id; p <= id+overflow; p++ {
		if a.marked(p) {
			a.damaged++
		}
	}
	b := make([]byte, int64(overflow+1)*a.ps)
	if _, err := a.r.ReadAt(b, int64(id)*a.ps); err != nil {
		a.err = fmt.Errorf("ratedb: reading page: %w", err)
		return
	}
	ids, ok := freelistIDs(b)
	if !ok {
		a.damaged++
		return
	}
	for i := 0; i < len(ids); i += 8 {
		if p := binary.LittleEndian.Uint64(ids[i:]); p < a.pgid && a.marked(p) {
			a.damaged++
		}
	}
}

func (a *pageAudit) mark(id uint64)        { a.seen[id/64] |= 1 << (id % 64) }
func (a *pageAudit) marked(id uint64) bool { return a.seen[id/64]&(1<<(id%64)) != 0 }

// checkPage checks the page (or inline page) b, numbered id: its header,
// that every element, key and value lies inside b, and that the keys are in
// increasing order, as bbolt's binary searches need. It calls leaf for each
// leaf element inside b (leaf reports whether the element is acceptable)
// and child for each branch element's child page and key (valid only
// during the call). It reports whether the page is sound. It never panics,
// whatever b holds (FuzzCheckPage).
func checkPage(b []byte, id uint64, inline bool, leaf func(k, v []byte, flags uint32) bool, child func(id uint64, key []byte)) bool {
	if len(b) < pageHeader {
		return false
	}
	le := binary.LittleEndian
	flags, count := le.Uint16(b[8:]), int(le.Uint16(b[10:]))
	ok := true
	switch {
	case !inline && le.Uint64(b) != id:
		ok = false // bbolt panics on a page that names another id
	case flags == pageBranch && !inline:
		if count == 0 {
			return false
		}
	case flags == pageLeaf:
	default:
		return false
	}
	if pageHeader+count*elemSize > len(b) {
		ok = false
		count = (len(b) - pageHeader) / elemSize
	}
	size := uint64(len(b))
	var prev []byte // the previous element's key, if it lay inside b
	ordered := func(k []byte) {
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			ok = false
		}
		prev = k
	}
	for i := range count {
		off := pageHeader + i*elemSize
		e := b[off : off+elemSize]
		if flags == pageBranch {
			pos, ksize := uint64(le.Uint32(e[0:])), uint64(le.Uint32(e[4:]))
			if uint64(off)+pos+ksize > size {
				ok, prev = false, nil
				continue
			}
			k := b[uint64(off)+pos : uint64(off)+pos+ksize]
			ordered(k)
			if child != nil {
				child(le.Uint64(e[8:]), k)
			}
			continue
		}
		eflags := le.Uint32(e[0:])
		pos, ksize, vsize := uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
		start := uint64(off) + pos
		if start+ksize+vsize > size {
			ok, prev = false, nil
			continue
		}
		ordered(b[start : start+ksize])
		if leaf != nil && !leaf(b[start:start+ksize], b[start+ksize:start+ksize+vsize], eflags) {
			ok = false
		}
	}
	return ok
}
