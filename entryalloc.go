package ratedb

import "unsafe"

// Short keys share their entry's allocation: the key's bytes follow the
// entry in memory, so a look-up that reaches the entry finds the key to
// compare in the next cache line instead of behind one more pointer, and a
// window costs one heap object instead of two. The entry never pins a buffer
// the caller sliced its key from.

// inlineKeyLen is the longest key stored inline. An entry is 96 bytes, so an
// entry with up to 32 key bytes fills one 128-byte size class exactly.
const inlineKeyLen = 32

// entryWithKey is an entry followed by the bytes of a short key.
type entryWithKey struct {
	e entry
	k [inlineKeyLen]byte
}

// allocEntry returns a zero entry whose key is a private copy of key.
func allocEntry(key string) *entry {
	if len(key) <= inlineKeyLen {
		ek := new(entryWithKey)
		n := copy(ek.k[:], key)
		ek.e.key = unsafe.String(&ek.k[0], n)
		return &ek.e
	}
	e := new(entry)
	b := make([]byte, len(key))
	copy(b, key)
	e.key = unsafe.String(unsafe.SliceData(b), len(b))
	return e
}
