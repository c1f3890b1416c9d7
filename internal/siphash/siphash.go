// Package siphash computes SipHash-2-4 (Aumasson and Bernstein, "SipHash: a
// fast short-input PRF", 2012) with a 128-bit key and a 64-bit result.
//
// ratedb orders the windows of its file by a keyed hash of their keys, with a
// secret key created with the file: the order is stable across processes, and
// nobody who does not know the key can aim many keys at one block. The
// functions are pure and safe for concurrent use.
package siphash

import (
	"encoding/binary"
	"math/bits"
)

// Key is a SipHash key: the 16 key bytes read as two little-endian words.
type Key struct{ K0, K1 uint64 }

// KeyFrom reads a key from its 16 bytes, as the reference implementation
// does. It panics if b is shorter than 16 bytes.
func KeyFrom(b []byte) Key {
	return Key{binary.LittleEndian.Uint64(b[0:8]), binary.LittleEndian.Uint64(b[8:16])}
}

// Bytes returns the key's 16 bytes, as KeyFrom reads them.
func (k Key) Bytes() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b[0:8], k.K0)
	binary.LittleEndian.PutUint64(b[8:16], k.K1)
	return b
}

// Sum64 returns the SipHash-2-4 of m under k.
func Sum64(k Key, m []byte) uint64 {
	v0 := k.K0 ^ 0x736f6d6570736575
	v1 := k.K1 ^ 0x646f72616e646f6d
	v2 := k.K0 ^ 0x6c7967656e657261
	v3 := k.K1 ^ 0x7465646279746573
	n := len(m)
	for len(m) >= 8 {
		w := binary.LittleEndian.Uint64(m)
		v3 ^= w
		v0, v1, v2, v3 = round(v0, v1, v2, v3)
		v0, v1, v2, v3 = round(v0, v1, v2, v3)
		v0 ^= w
		m = m[8:]
	}
	w := uint64(n) << 56
	for i := len(m) - 1; i >= 0; i-- {
		w |= uint64(m[i]) << (8 * uint(i))
	}
	v3 ^= w
	v0, v1, v2, v3 = round(v0, v1, v2, v3)
	v0, v1, v2, v3 = round(v0, v1, v2, v3)
	v0 ^= w
	v2 ^= 0xff
	for range 4 {
		v0, v1, v2, v3 = round(v0, v1, v2, v3)
	}
	return v0 ^ v1 ^ v2 ^ v3
}

// round is one SipRound.
func round(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}
