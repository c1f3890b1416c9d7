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

// An entry with its inline key fills a size class exactly, and the key it
// holds is a private copy.
func TestEntryWithKeySize(t *testing.T) {
	for _, c := range []struct{ got, want uintptr }{
		{unsafe.Sizeof(entryWith[[32]byte]{}), 128},
		{unsafe.Sizeof(entryWith[[48]byte]{}), 144},
		{unsafe.Sizeof(entryWith[[inlineKeyLen]byte]{}), 160},
	} {
		if c.got != c.want {
			t.Fatalf("an entry with its key is %d bytes, want %d", c.got, c.want)
		}
	}
	for _, n := range []int{0, 1, 15, 16, 17, 32, 33, 48, 49, inlineKeyLen, inlineKeyLen + 1, 300} {
		src := []byte(strings.Repeat("k", n))
		e := allocEntry(string(src))
		if n > 0 {
			src[0] = 'x'
		}
		if e.key != strings.Repeat("k", n) {
			t.Fatalf("key of %d bytes not copied", n)
		}
	}
	// One object a window up to inlineKeyLen key bytes, two beyond.
	for n, want := range map[int]float64{15: 1, 40: 1, inlineKeyLen: 1, inlineKeyLen + 1: 2} {
		key := strings.Repeat("k", n)
		if got := testing.AllocsPerRun(100, func() { allocEntry(key) }); got != want {
			t.Fatalf("a %d-byte key: %v allocations, want %v", n, got, want)
		}
	}
}

// An entry keeps the file hash of its record key in the bytes its
// allocation leaves after the key, where there are eight: the hash reads
// back as written and the key stays as it was.
func TestEntryKeepsFileHash(t *testing.T) {
	for n := 0; n <= 2*inlineKeyLen; n++ {
		key := strings.Repeat("k", n)
		e := allocEntry(key)
		room := n <= 24 || (n > 32 && n <= 40) || (n > 48 && n <= 56) || n > inlineKeyLen
		if got := e.bits&hashRoomBit != 0; got != room {
			t.Fatalf("a %d-byte key: room for a hash %t, want %t", n, got, room)
		}
		if _, ok := e.fileHash(); ok {
			t.Fatalf("a %d-byte key: a hash kept before any was given", n)
		}
		const h = 0x0102030405060708
		e.keepFileHash(h)
		got, ok := e.fileHash()
		if ok != room || (ok && got != h) {
			t.Fatalf("a %d-byte key: kept hash %#x, %t; want %#x, %t", n, got, ok, uint64(h), room)
		}
		if e.key != key {
			t.Fatalf("a %d-byte key changed to %q by its kept hash", n, e.key)
		}
	}
}
