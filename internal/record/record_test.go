package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	key := []byte("\x01\x00\x00\x00\x00\x00\x00\xea\x60user:42")
	cases := [][]Counter{
		{{Count: 0, End: 0}},
		{{Count: 7, End: 1_767_225_660_000}},
		{{Count: 1, End: -5}, {Count: 1 << 62, End: 1 << 61}, {Count: 3, End: 0}},
	}
	for _, cs := range cases {
		v := AppendValue(nil, key, cs)
		if len(v) != ValueLen(len(cs)) {
			t.Fatalf("len %d, want %d", len(v), ValueLen(len(cs)))
		}
		got, err := Decode(nil, key, v, len(cs))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(got) != len(cs) {
			t.Fatalf("got %d counters", len(got))
		}
		for i := range cs {
			if got[i] != cs[i] {
				t.Errorf("counter %d: %+v, want %+v", i, got[i], cs[i])
			}
		}
		if _, err := Decode(nil, key, v, AnyTiers); err != nil {
			t.Errorf("AnyTiers: %v", err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	key := []byte("k")
	good := AppendValue(nil, key, []Counter{{Count: 3, End: 99}})
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	cases := []struct {
		name string
		key  []byte
		v    []byte
		n    int
		want error
	}{
		{"empty", key, nil, 1, ErrShort},
		{"version", key, flip(0), 1, ErrVersion},
		{"tiers", key, good, 2, ErrTiers},
		{"truncated", key, good[:len(good)-1], 1, ErrShort},
		{"count bit", key, flip(5), 1, ErrChecksum},
		{"end bit", key, flip(12), 1, ErrChecksum},
		{"checksum bit", key, flip(len(good) - 1), 1, ErrChecksum},
		{"other key", []byte("j"), good, 1, ErrChecksum},
		{"negative count", key, AppendValue(nil, key, []Counter{{Count: -1}}), 1, ErrCount},
	}
	for _, tc := range cases {
		if _, err := Decode(nil, tc.key, tc.v, tc.n); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestIndexKeyOrder(t *testing.T) {
	ends := []int64{-1 << 62, -1, 0, 1, 1_767_225_600_000, 1 << 62}
	var prev []byte
	for _, e := range ends {
		ik := AppendIndexKey(nil, e, []byte("k"))
		if prev != nil && bytes.Compare(prev, ik) >= 0 {
			t.Errorf("index key for %d does not sort after the previous one", e)
		}
		end, k, ok := ParseIndexKey(ik)
		if !ok || end != e || string(k) != "k" {
			t.Errorf("ParseIndexKey(%d) = %d %q %v", e, end, k, ok)
		}
		prev = ik
	}
	if _, _, ok := ParseIndexKey([]byte("short")); ok {
		t.Error("short index key accepted")
	}
}

// FuzzDecode feeds arbitrary bytes to the decoder: it must never panic, and
// whatever it accepts must re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	key := []byte("\x01key")
	f.Add(key, AppendValue(nil, key, []Counter{{Count: 1, End: 2}}), 1)
	f.Add(key, AppendValue(nil, key, []Counter{{Count: 1, End: 2}, {Count: 5, End: 9}}), 2)
	f.Add([]byte{}, []byte{1, 1}, -1)
	f.Add(key, []byte{}, 0)
	f.Fuzz(func(t *testing.T, key, v []byte, n int) {
		checkDecode(t, key, v, n)
		// Random bytes almost never carry a valid checksum: decode v
		// resealed too (its last 4 bytes replaced by the right
		// CRC-32C), so that the checks behind the checksum are reached.
		body := v[:max(len(v)-4, 0)]
		sum := crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, body)
		checkDecode(t, key, binary.BigEndian.AppendUint32(bytes.Clone(body), sum), n)
	})
}

// checkDecode decodes v, stored under key: whatever Decode accepts must
// re-encode to the same bytes and hold no negative count.
func checkDecode(t *testing.T, key, v []byte, n int) {
	t.Helper()
	cs, err := Decode(nil, key, v, n)
	if err != nil {
		return
	}
	if again := AppendValue(nil, key, cs); !bytes.Equal(again, v) {
		t.Fatalf("accepted value does not round-trip: %x vs %x", v, again)
	}
	for _, c := range cs {
		if c.Count < 0 {
			t.Fatalf("negative count accepted")
		}
	}
}
