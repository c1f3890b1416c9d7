// Package record encodes and decodes what ratedb stores in its bbolt file:
// blocks of windows (file format ratedb/2, see AppendBlock), each window a
// record key and the counters of its tiers. The one-value-per-window record
// and expiry-index key of format ratedb/1 (Decode, AppendValue,
// AppendIndexKey) remain for the migration of such files.
//
// Every function here is pure and allocation-conscious; Decode and
// DecodeBlock never panic on any input (they are fuzzed).
package record

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Version is the record format version written by this package.
const Version = 1

// MaxTiers is the largest number of counters one record can hold.
const MaxTiers = 16

// AnyTiers tells Decode to accept any valid number of counters.
const AnyTiers = -1

// Counter is one tier's state: Count hits in the window that ends at End
// (Unix milliseconds, exclusive). End == 0 means the tier has no window.
type Counter struct {
	Count int64
	End   int64
}

// Errors returned by Decode.
var (
	ErrShort    = errors.New("record: value too short")
	ErrVersion  = errors.New("record: unknown format version")
	ErrTiers    = errors.New("record: wrong number of tiers")
	ErrChecksum = errors.New("record: checksum mismatch")
	ErrCount    = errors.New("record: negative count")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ValueLen is the encoded length of a value holding n counters.
func ValueLen(n int) int { return 2 + 16*n + 4 }

// AppendValue appends the encoding of cs to dst. The checksum covers key too,
// so a value stored under the wrong key fails to decode.
//
// Layout: version (1) | n (1) | n x (count, end: 8 bytes big endian each) |
// CRC-32C of key || everything before it (4).
func AppendValue(dst, key []byte, cs []Counter) []byte {
	start := len(dst)
	dst = append(dst, Version, byte(len(cs)))
	for _, c := range cs {
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.Count))
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.End))
	}
	sum := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, dst[start:])
	return binary.BigEndian.AppendUint32(dst, sum)
}

// Decode decodes v, stored under key, into dst[:0] and returns it. It checks
// the version, that the value holds exactly n counters (any number from 1 to
// MaxTiers when n is AnyTiers), the checksum, and that no count is negative.
func Decode(dst []Counter, key, v []byte, n int) ([]Counter, error) {
	if len(v) < 2 {
		return dst, ErrShort
	}
	if v[0] != Version {
		return dst, ErrVersion
	}
	if n == AnyTiers {
		n = int(v[1])
	}
	if int(v[1]) != n || n < 1 || n > MaxTiers {
		return dst, ErrTiers
	}
	if len(v) != ValueLen(n) {
		return dst, ErrShort
	}
	body := v[:len(v)-4]
	sum := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, body)
	if sum != binary.BigEndian.Uint32(v[len(v)-4:]) {
		return dst, ErrChecksum
	}
	dst = dst[:0]
	for i := 0; i < n; i++ {
		p := body[2+16*i:]
		c := Counter{
			Count: int64(binary.BigEndian.Uint64(p)),
			End:   int64(binary.BigEndian.Uint64(p[8:])),
		}
		if c.Count < 0 {
			return dst[:0], ErrCount
		}
		dst = append(dst, c)
	}
	return dst, nil
}

// MaxEnd returns the latest End among cs: the instant the record stops
// holding any live window.
func MaxEnd(cs []Counter) int64 {
	var m int64
	for i, c := range cs {
		if i == 0 || c.End > m {
			m = c.End
		}
	}
	return m
}

// IndexKeyLen is the length of the expiry-index key for a window key of
// length n.
func IndexKeyLen(n int) int { return 8 + n }

// AppendIndexKey appends the expiry-index key for the window key k whose last
// tier ends at end: end (8 bytes, big endian with the sign bit flipped so that
// byte order is numeric order) followed by k.
func AppendIndexKey(dst []byte, end int64, k []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(end)^(1<<63))
	return append(dst, k...)
}

// ParseIndexKey splits an expiry-index key into its end and window key.
func ParseIndexKey(ik []byte) (end int64, k []byte, ok bool) {
	if len(ik) < 8 {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(ik) ^ (1 << 63)), ik[8:], true
}

// EncodeInt64 returns the 8-byte big-endian encoding of v in a new slice.
func EncodeInt64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// DecodeInt64 decodes an 8-byte big-endian value.
func DecodeInt64(b []byte) (int64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b)), true
}
