package layout_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ratedb/ratedb/internal/layout"
)

const fuzzPage = 128 // a small page size, so that the fuzzer builds trees

// page writes a page header (id, flags, count, overflow) at page id of f.
func page(f []byte, id uint64, flags, count uint16, overflow uint32, children ...uint64) {
	b := f[id*fuzzPage:]
	binary.LittleEndian.PutUint64(b, id)
	binary.LittleEndian.PutUint16(b[8:], flags)
	binary.LittleEndian.PutUint16(b[10:], count)
	binary.LittleEndian.PutUint32(b[12:], overflow)
	for i, c := range children {
		binary.LittleEndian.PutUint64(b[16+16*i+8:], c)
	}
}

// acceptsTree is CheckTree's reference: a plain breadth-first walk.
func acceptsTree(f []byte, pages uint64, roots []uint64) bool {
	le := binary.LittleEndian
	seen := map[uint64]bool{}
	for q := append([]uint64(nil), roots...); len(q) > 0; q = q[1:] {
		id := q[0]
		if id < 2 || id >= pages {
			return false
		}
		b := f[id*fuzzPage:]
		flags, count, overflow := le.Uint16(b[8:]), uint64(le.Uint16(b[10:])), uint64(le.Uint32(b[12:]))
		if le.Uint64(b) != id || id+overflow >= pages {
			return false
		}
		for p := id; p <= id+overflow; p++ {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
		if flags == 0x02 {
			continue
		}
		if flags != 0x01 || 16+16*count > (overflow+1)*fuzzPage {
			return false
		}
		for i := range count {
			q = append(q, le.Uint64(b[16+16*i+8:]))
		}
	}
	return true
}

func TestCheckTree(t *testing.T) {
	f := make([]byte, 8*fuzzPage)
	page(f, 2, 0x01, 2, 0, 3, 4) // a branch over two leaves
	page(f, 3, 0x02, 0, 0)
	page(f, 4, 0x02, 0, 1) // a leaf with an overflow page (5)
	page(f, 6, 0x02, 0, 0)
	for name, tc := range map[string]struct {
		change func(f []byte)
		ok     bool
	}{
		"sound":                    {func([]byte) {}, true},
		"a child is its parent":    {func(f []byte) { page(f, 2, 0x01, 2, 0, 3, 2) }, false},
		"a leaf reached twice":     {func(f []byte) { page(f, 2, 0x01, 2, 0, 3, 3) }, false},
		"a link into an overflow":  {func(f []byte) { page(f, 2, 0x01, 2, 0, 3, 5) }, false},
		"a link out of range":      {func(f []byte) { page(f, 2, 0x01, 2, 0, 3, 8) }, false},
		"a link to a meta page":    {func(f []byte) { page(f, 2, 0x01, 2, 0, 3, 1) }, false},
		"a page with another id":   {func(f []byte) { binary.LittleEndian.PutUint64(f[3*fuzzPage:], 6) }, false},
		"a freelist page":          {func(f []byte) { page(f, 3, 0x10, 0, 0) }, false},
		"too many elements":        {func(f []byte) { page(f, 2, 0x01, 8, 0, 3, 4) }, false},
		"an overflow past the end": {func(f []byte) { page(f, 4, 0x02, 0, 4) }, false},
	} {
		g := bytes.Clone(f)
		tc.change(g)
		err := layout.CheckTree(bytes.NewReader(g), fuzzPage, 8, 2)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, layout.ErrDamaged)) {
			t.Errorf("%s: CheckTree = %v", name, err)
		}
		if acceptsTree(g, 8, []uint64{2}) != tc.ok {
			t.Errorf("%s: the reference disagrees", name)
		}
	}
	if err := layout.CheckTree(bytes.NewReader(f), fuzzPage, 8, 2, 6); err != nil {
		t.Errorf("two trees: %v", err)
	}
	if err := layout.CheckTree(bytes.NewReader(f), fuzzPage, 8, 2, 4); err == nil {
		t.Error("a root inside another tree was accepted")
	}
}

// FuzzCheckTree: on any file, CheckTree returns (never loops or panics) and
// accepts exactly the files its reference accepts.
func FuzzCheckTree(f *testing.F) {
	seed := make([]byte, 8*fuzzPage)
	page(seed, 2, 0x01, 2, 0, 3, 4)
	page(seed, 3, 0x02, 0, 0)
	page(seed, 4, 0x02, 0, 0)
	f.Add(seed, uint64(2))
	cyc := bytes.Clone(seed)
	page(cyc, 4, 0x01, 1, 0, 2)
	f.Add(cyc, uint64(2))
	f.Fuzz(func(t *testing.T, file []byte, root uint64) {
		pages := uint64(len(file) / fuzzPage)
		if pages < 3 || pages > 64 {
			return
		}
		file = file[:pages*fuzzPage]
		err := layout.CheckTree(bytes.NewReader(file), fuzzPage, pages, root)
		if err != nil && !errors.Is(err, layout.ErrDamaged) {
			t.Fatalf("CheckTree = %v: not ErrDamaged", err)
		}
		if want := acceptsTree(file, pages, []uint64{root}); (err == nil) != want {
			t.Fatalf("CheckTree = %v, reference accepts: %v", err, want)
		}
	})
}
