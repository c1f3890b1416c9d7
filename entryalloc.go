package ratedb

import (
	"encoding/binary"
	"unsafe"
)

// Short keys share their entry's allocation: the key's bytes follow the
// entry in memory, so a look-up that reaches the entry finds the key to
// compare in the next cache line instead of behind one more pointer, and a
// window costs one heap object instead of two. The entry never pins a buffer
// the caller sliced its key from.
//
// An entry is 96 bytes, and 96 plus 32, 48 and 64 are Go size classes: a
// key of up to 32 bytes (an IPv4 address with a prefix) is stored in a
// 128-byte object, whose two cache lines hold the entry's fields and the
// key; a longer one of up to 64 bytes (an IPv6 address, a 40-character API
// key) in a 144- or 160-byte object, no larger than the entry and a
// separate copy of the key would take. (A 112-byte class for keys of up to
// 16 bytes would save 16 bytes a window, but its objects straddle cache
// lines: half of them would need three lines for a look-up instead of two.)

// inlineKeyLen is the longest key stored inline.
const inlineKeyLen = 64

// The bytes an entry's allocation leaves after its key keep the file hash
// of its record key (layout.Hash of the spec's prefix and the key), when
// there are at least eight: keys of up to 24 bytes, of 33 to 40, of 49 to
// 56, and a key longer than inlineKeyLen whose copy's size class leaves
// eight bytes after it (65 to 72 bytes, 81 to 88, but not 73 to 80, nor a
// key of 128 or 4096 bytes, which fills its class): the room is only ever
// what the allocation has anyway, never a byte more. A snapshot then copies
// a window without hashing its record key again: a SipHash of a 24-byte
// record key is about 20 ns of the 270 a window costs. The file's secret
// never changes while a DB is open (a rebuild keeps it), so a kept hash
// stays right. A key without room (25 to 32 bytes, say) is hashed at every
// snapshot, as before.

// fileHashLen is the size of a kept file hash.
const fileHashLen = 8

// keyRoom returns where the room for a file hash after a key of n bytes
// ends, counted from the key's first byte: the end of the array an inline
// key is stored in, and eight bytes after a longer key (which its
// allocation holds only when allocEntry set hashRoomBit).
func keyRoom(n int) int {
	switch {
	case n <= 32:
		return 32
	case n <= 48:
		return 48
	case n <= inlineKeyLen:
		return inlineKeyLen
	}
	return n + fileHashLen
}

// fileHashSlot returns the eight bytes after e's key that keep its file
// hash. Only for an entry allocEntry made with room for one (hashRoomBit).
func (e *entry) fileHashSlot() []byte {
	room := keyRoom(len(e.key))
	return unsafe.Slice(unsafe.StringData(e.key), room)[room-fileHashLen : room : room]
}

// fileHash returns the kept file hash of e's record key, if one is kept.
// e.mu held (or e not yet shared).
func (e *entry) fileHash() (uint64, bool) {
	if e.bits&hashKeptBit == 0 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(e.fileHashSlot()), true
}

// keepFileHash keeps h, the file hash of e's record key, if e's allocation
// has room for it. e.mu held (or e not yet shared).
func (e *entry) keepFileHash(h uint64) {
	if e.bits&hashRoomBit == 0 {
		return
	}
	binary.LittleEndian.PutUint64(e.fileHashSlot(), h)
	e.bits |= hashKeptBit
}

// entryWith is an entry followed by the bytes of a short key; K is a byte
// array.
type entryWith[K any] struct {
	e entry
	k K
}

// allocEntry returns a zero entry whose key is a private copy of key.
func allocEntry(key string) *entry {
	switch n := len(key); {
	case n <= 32:
		return allocInline[[32]byte](key)
	case n <= 48:
		return allocInline[[48]byte](key)
	case n <= inlineKeyLen:
		return allocInline[[inlineKeyLen]byte](key)
	}
	e := new(entry)
	// append rounds the capacity up to the size class of the copy's
	// allocation: room for a file hash only where that class leaves it.
	b := append([]byte(nil), key...)
	e.key = unsafe.String(unsafe.SliceData(b), len(b))
	if cap(b)-len(b) >= fileHashLen {
		e.bits = hashRoomBit
	}
	return e
}

// allocInline allocates an entry with the byte array K behind it, copies
// key (at most len(K) bytes) into the array and points the entry's key at
// the copy.
func allocInline[K any](key string) *entry {
	ek := new(entryWith[K])
	b := unsafe.Slice((*byte)(unsafe.Pointer(&ek.k)), unsafe.Sizeof(ek.k))
	n := copy(b, key)
	ek.e.key = unsafe.String(unsafe.SliceData(b), n)
	if len(b)-n >= fileHashLen {
		ek.e.bits = hashRoomBit
	}
	return &ek.e
}
