package ratedb

import (
	"bytes"
	"testing"
)

// compareRecs must order records exactly as bbolt orders their keys, or a
// snapshot's inserts stop being sorted.
func FuzzCompareRecs(f *testing.F) {
	f.Add("a", "a\x00", false)
	f.Add("abcdefgh1", "abcdefgh0", false)
	f.Add("\xff", "\xff\xff\xff\xff\xff\xff\xff\xff\x00", true)
	f.Add("", "x", true)
	sa := &spec{prefix: []byte{1, 0, 0, 0, 0, 0, 0, 0, 1}}
	sb := &spec{prefix: []byte{2, 0, 0, 0, 0, 0, 0, 0, 1}}
	f.Fuzz(func(t *testing.T, ka, kb string, sameSpec bool) {
		s2 := sb
		if sameSpec {
			s2 = sa
		}
		a := snapRec{s: sa, k: append(append([]byte{}, sa.prefix...), ka...), k8: key8(ka)}
		b := snapRec{s: s2, k: append(append([]byte{}, s2.prefix...), kb...), k8: key8(kb)}
		if got, want := compareRecs(&a, &b), bytes.Compare(a.k, b.k); got != want {
			t.Fatalf("compareRecs(%q, %q) = %d, bytes.Compare = %d", ka, kb, got, want)
		}
	})
}

// The slab never hands out overlapping or moving bytes: bbolt keeps every
// slice passed to Put until the transaction ends.
func TestSlabNeverReuses(t *testing.T) {
	var sl slab
	var got [][]byte
	for i := 0; i < 3000; i++ {
		b := sl.alloc(1 + i%700)
		for j := range b {
			b[j] = byte(i)
		}
		got = append(got, b)
	}
	for i, b := range got {
		if len(b) != 1+i%700 || cap(b) != len(b) {
			t.Fatalf("slice %d: len %d cap %d", i, len(b), cap(b))
		}
		for _, c := range b {
			if c != byte(i) {
				t.Fatalf("slice %d was overwritten", i)
			}
		}
	}
}
