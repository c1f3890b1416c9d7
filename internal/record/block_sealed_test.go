package record

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A block whose checksum holds but whose structure is wrong after the window
// looked up (bytes left over after its last window, or a base that is not
// its windows' earliest expiry) is malformed as a whole: FindInBlock must
// reject it as DecodeBlock does, not return the window it met first. Before,
// it stopped at the match, so a look-up (and the janitor's leftInFile) read
// a window from a block that snapshots, the janitor and the presence filter
// treat as damaged.
func TestFindInBlockChecksWholeBlock(t *testing.T) {
	bk := []byte{0, 0, 0, 0, 0, 0, 1, 0}
	ws := []BlockWindow{
		{Key: []byte("first"), Counters: []Counter{{Count: 3, End: 1000}}},
		{Key: []byte("second"), Counters: []Counter{{Count: 4, End: 2000}}},
	}
	good := AppendBlock(nil, bk, ws)
	body := good[:len(good)-4]
	seal := func(body []byte) []byte {
		sum := crc32.Update(crc32.Checksum(bk, castagnoli), castagnoli, body)
		return binary.BigEndian.AppendUint32(append([]byte(nil), body...), sum)
	}
	// The same windows under a base of 999, one before their earliest
	// expiry (each end written as its distance from the base).
	wrongBase := binary.AppendVarint([]byte{BlockVersion, 2}, 999)
	for _, w := range ws {
		wrongBase = append(binary.AppendUvarint(wrongBase, uint64(len(w.Key))), w.Key...)
		wrongBase = append(wrongBase, 1)
		wrongBase = binary.AppendUvarint(wrongBase, uint64(w.Counters[0].Count))
		wrongBase = binary.AppendVarint(wrongBase, w.Counters[0].End-999)
	}
	for _, tc := range []struct {
		name string
		v    []byte
	}{
		{"trailing bytes", seal(append(append([]byte(nil), body...), 0x01, 0x02))},
		{"wrong base", seal(wrongBase)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Block
			require.ErrorIs(t, DecodeBlock(&b, bk, tc.v), ErrBlock)
			for _, key := range []string{"first", "second", "absent"} {
				cs, found, err := FindInBlock(make([]Counter, 0, 1), bk, tc.v, []byte(key))
				assert.ErrorIs(t, err, ErrBlock, key)
				assert.False(t, found, key)
				assert.Empty(t, cs, key)
			}
		})
	}
	// The sound block still finds both windows.
	for _, w := range ws {
		cs, found, err := FindInBlock(nil, bk, good, w.Key)
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, w.Counters, cs)
	}
}
