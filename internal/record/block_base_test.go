package record

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// A block whose checksum holds but whose base is not the least MaxEnd of its
// windows is malformed: ratedb's janitor files each block under its base
// (BlockHeader's minEnd) and reads it only once that time has passed, so a
// base later than a window's end would keep that expired window in the file
// past its due. DecodeBlock and BlockHeader must refuse it.
func TestDecodeBlockBaseIsMinEnd(t *testing.T) {
	bk := []byte("blockkey")
	// 1 window, base 2; key "k", 1 tier, count 5, end base-1 = 1.
	body := []byte{BlockVersion, 1, 4, 1, 'k', 1, 5, 1}
	sum := crc32.Update(crc32.Checksum(bk, castagnoli), castagnoli, body)
	v := binary.BigEndian.AppendUint32(body, sum)
	var b Block
	if err := DecodeBlock(&b, bk, v); !errors.Is(err, ErrBlock) || len(b.Windows) != 0 {
		t.Fatalf("DecodeBlock = %d windows, err %v; want none and ErrBlock", len(b.Windows), err)
	}
	if n, minEnd, err := BlockHeader(bk, v); !errors.Is(err, ErrBlock) {
		t.Fatalf("BlockHeader = %d windows, earliest expiry %d, err %v; want ErrBlock", n, minEnd, err)
	}
}
