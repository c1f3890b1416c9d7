package ratedb

import "unsafe"

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
	b := make([]byte, len(key))
	copy(b, key)
	e.key = unsafe.String(unsafe.SliceData(b), len(b))
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
	return &ek.e
}
