package ratedb

import (
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
