package ratedb

import (
	"runtime"
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
// A key longer than inlineKeyLen has room where the size class of its copy
// leaves eight bytes (TestLongKeyEntryCostsNoMoreThanACopy pins that the
// room costs nothing); every length up to MaxKeyLen is tried, so that a slot
// outside the allocation fails checkptr under -race.
func TestEntryKeepsFileHash(t *testing.T) {
	for n := 0; n <= MaxKeyLen; n++ {
		key := strings.Repeat("k", n)
		e := allocEntry(key)
		room := n <= 24 || (n > 32 && n <= 40) || (n > 48 && n <= 56) ||
			(n > inlineKeyLen && cap(append([]byte(nil), key...))-n >= fileHashLen)
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

// A window whose key is longer than inlineKeyLen costs an entry and a copy
// of its key, not a byte more: the room for a kept file hash is only what
// the copy's size class leaves (a key of 80, 128 or 4096 bytes has none).
// Measured in bytes allocated, the least of three tries, since another
// goroutine's allocations can only add to them.
func TestLongKeyEntryCostsNoMoreThanACopy(t *testing.T) {
	const reps = 1000
	entries := make([]*entry, reps)
	copies := make([][]byte, reps)
	perRun := func(f func(i int)) uint64 {
		least := ^uint64(0)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := range reps {
				f(i)
			}
			runtime.ReadMemStats(&after)
			least = min(least, (after.TotalAlloc-before.TotalAlloc)/reps)
		}
		return least
	}
	for _, n := range []int{inlineKeyLen + 1, 72, 73, 80, 88, 96, 100, 128, 256, 1000, MaxKeyLen} {
		key := strings.Repeat("k", n)
		got := perRun(func(i int) { entries[i] = allocEntry(key) })
		want := uint64(unsafe.Sizeof(entry{})) + perRun(func(i int) { copies[i] = make([]byte, n) })
		if got > want {
			t.Errorf("a %d-byte key: %d bytes a window, want at most %d (an entry and a copy of the key)", n, got, want)
		}
	}
	runtime.KeepAlive(entries)
	runtime.KeepAlive(copies)
}
