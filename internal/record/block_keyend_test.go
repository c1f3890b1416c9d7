package record

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// A block whose checksum holds but whose last window's key runs to the end
// of the body (no tier-count byte left) is malformed: DecodeBlock and
// FindInBlock must return an error, never index past the end.
func TestDecodeBlockKeyRunsToEnd(t *testing.T) {
	bk := []byte("blockkey")
	body := []byte{BlockVersion, 1, 0, 3, 'a', 'b', 'c'} // 1 window, base 0, key of 3 bytes, then nothing
	sum := crc32.Update(crc32.Checksum(bk, castagnoli), castagnoli, body)
	v := binary.BigEndian.AppendUint32(body, sum)
	var b Block
	if err := DecodeBlock(&b, bk, v); err == nil {
		t.Fatal("DecodeBlock accepted a window with no tier count")
	}
	if _, found, err := FindInBlock(nil, bk, v, []byte("abc")); err == nil || found {
		t.Fatalf("FindInBlock = found %v, err %v; want an error", found, err)
	}
}
