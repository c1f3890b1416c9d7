package ratedb

import (
	"strings"
	"testing"
	"unsafe"
)

// TestEntrySize guards the per-window memory budget: an entry is allocated
// for every window in memory, and 96 bytes is a Go size class.
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got > 96 {
		t.Fatalf("entry is %d bytes, over the 96-byte size class", got)
	}
}

// An entry with its inline key fills the 128-byte size class exactly, and
// the key it holds is a private copy.
func TestEntryWithKeySize(t *testing.T) {
	if got := unsafe.Sizeof(entryWithKey{}); got != 128 {
		t.Fatalf("entryWithKey is %d bytes, want 128", got)
	}
	for _, n := range []int{1, inlineKeyLen, inlineKeyLen + 1, 300} {
		src := []byte(strings.Repeat("k", n))
		e := allocEntry(string(src))
		src[0] = 'x'
		if e.key != strings.Repeat("k", n) {
			t.Fatalf("key of %d bytes not copied", n)
		}
	}
}
