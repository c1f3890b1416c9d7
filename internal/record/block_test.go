package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// windowsFrom builds windows from arbitrary bytes: the fuzzer's way to reach
// every key length, tier count, count and end.
func windowsFrom(seed []byte) []BlockWindow {
	var ws []BlockWindow
	next := func(n int) []byte {
		if len(seed) < n {
			b := make([]byte, n)
			copy(b, seed)
			seed = nil
			return b
		}
		b := seed[:n]
		seed = seed[n:]
		return b
	}
	for len(seed) > 0 && len(ws) < 200 {
		h := next(2)
		key := bytes.Clone(next(1 + int(h[0])%40))
		tiers := 1 + int(h[1])%MaxTiers
		cs := make([]Counter, tiers)
		for i := range cs {
			b := next(16)
			cs[i] = Counter{Count: int64(binary.LittleEndian.Uint64(b) >> (1 + b[0]%63)), End: int64(binary.LittleEndian.Uint64(b[8:])) >> (b[8] % 64)}
		}
		ws = append(ws, BlockWindow{Key: key, Counters: cs})
	}
	return ws
}

func sameWindows(t *testing.T, want, got []BlockWindow) {
	t.Helper()
	require.Equal(t, len(want), len(got), "window count")
	for i := range want {
		require.Equal(t, want[i].Key, got[i].Key, "key of window %d", i)
		require.Equal(t, want[i].Counters, got[i].Counters, "counters of window %d", i)
	}
}

func TestBlockRoundTrip(t *testing.T) {
	bk := []byte{0, 0, 0, 0, 0, 0, 0, 7}
	for _, tc := range []struct {
		name string
		ws   []BlockWindow
	}{
		{"one window", []BlockWindow{{Key: []byte("\x01k"), Counters: []Counter{{Count: 3, End: 1_767_225_600_000}}}}},
		{"layered and a tier without a window", []BlockWindow{
			{Key: []byte("\x81\x02abc"), Counters: []Counter{{Count: 1, End: 0}, {Count: 9, End: 1_767_229_200_000}}},
			{Key: []byte("\x01z"), Counters: []Counter{{Count: 1 << 62, End: 1_767_225_600_000}}},
		}},
		{"extreme values", []BlockWindow{
			{Key: []byte{0}, Counters: []Counter{{Count: 1<<63 - 1, End: -1 << 63}, {Count: 0, End: 1<<63 - 1}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := AppendBlock(nil, bk, tc.ws)
			assert.Equal(t, BlockLen(tc.ws), len(v))
			var b Block
			require.NoError(t, DecodeBlock(&b, bk, v))
			sameWindows(t, tc.ws, b.Windows)
			assert.Equal(t, MinEnd(tc.ws), b.MinEnd)
			for _, w := range tc.ws {
				cs, found, err := FindInBlock(nil, bk, v, w.Key)
				require.NoError(t, err)
				assert.True(t, found)
				assert.Equal(t, w.Counters, cs)
			}
			_, found, err := FindInBlock(nil, bk, v, []byte("absent"))
			require.NoError(t, err)
			assert.False(t, found)
			n, minEnd, err := BlockHeader(bk, v)
			require.NoError(t, err)
			assert.Equal(t, len(tc.ws), n)
			assert.Equal(t, MinEnd(tc.ws), minEnd)
			// Under another key, the block fails its checksum.
			assert.ErrorIs(t, DecodeBlock(&b, []byte{1}, v), ErrChecksum)
			assert.Empty(t, b.Windows)
		})
	}
}

// A window of a 16-byte key under a Window's 9-byte prefix, counting under
// 128 in a window that ends at the block's base, takes 29 bytes.
func TestBlockCompact(t *testing.T) {
	var ws []BlockWindow
	for i := range 64 {
		key := fmt.Appendf([]byte("\x01\x00\x00\x00\x00\x00\x36\xee\x80"), "user:%011d", i)
		ws = append(ws, BlockWindow{Key: key, Counters: []Counter{{Count: int64(i), End: 1_767_229_200_000}}})
	}
	v := AppendBlock(nil, make([]byte, 8), ws)
	assert.Equal(t, 1+1+6+64*29+4, len(v))
}

func TestDecodeBlockAllocs(t *testing.T) {
	ws := windowsFrom(bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123456789"), 30))
	v := AppendBlock(nil, nil, ws)
	var b Block
	require.NoError(t, DecodeBlock(&b, nil, v))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = DecodeBlock(&b, nil, v) }))
	dst := make([]Counter, 0, MaxTiers)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _, _ = FindInBlock(dst, nil, v, ws[len(ws)-1].Key) }))
}

func FuzzDecodeBlock(f *testing.F) {
	bk := []byte{0, 0, 0, 0, 0, 0, 1, 0}
	seed := []byte("\x05\x00key-1\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x20\x02abc")
	f.Add(bk, AppendBlock(nil, bk, windowsFrom(seed)), seed, uint16(3), byte(1))
	f.Add([]byte{}, []byte{BlockVersion, 1, 0, 1, 'k', 1, 0, 0, 0, 0, 0, 0}, []byte{}, uint16(0), byte(0x80))
	f.Fuzz(func(t *testing.T, bk, raw, seed []byte, at uint16, by byte) {
		var b Block
		checkDecoded(t, &b, bk, raw)
		// A generated block: decode(encode(x)) == x, and any changed byte
		// fails the checksum.
		ws := windowsFrom(seed)
		if len(ws) == 0 {
			return
		}
		v := AppendBlock(nil, bk, ws)
		require.Equal(t, BlockLen(ws), len(v))
		require.NoError(t, DecodeBlock(&b, bk, v))
		sameWindows(t, ws, b.Windows)
		if by != 0 {
			v[int(at)%len(v)] ^= by
			err := DecodeBlock(&b, bk, v)
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrChecksum) || errors.Is(err, ErrVersion) || errors.Is(err, ErrShort), "%v", err)
			require.Empty(t, b.Windows)
		}
	})
}

// FuzzDecodeSealedBlock decodes bytes that carry a valid checksum. Random
// bytes almost never do, so FuzzDecodeBlock seldom gets past the checksum;
// here the fuzzer mutates the body of real blocks and the test seals it, so
// every input reaches the structure checks behind the checksum, which guard
// against a crafted block or a bug (the case of TestDecodeBlockKeyRunsToEnd,
// which mutation testing found unguarded).
func FuzzDecodeSealedBlock(f *testing.F) {
	bk := []byte{0, 0, 0, 0, 0, 0, 1, 0}
	for _, seed := range []string{
		"\x05\x00key-1\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x20\x02abc",
		"\x00\x01k\x01\x01\x01\x01\x01\x01\x01\x01\x01\x02\x02\x02\x02\x02\x02\x02\x02\x03\x0fz",
	} {
		v := AppendBlock(nil, bk, windowsFrom([]byte(seed)))
		f.Add(bk, v[:len(v)-4])
	}
	f.Fuzz(func(t *testing.T, bk, body []byte) {
		sum := crc32.Update(crc32.Checksum(bk, castagnoli), castagnoli, body)
		var b Block
		checkDecoded(t, &b, bk, binary.BigEndian.AppendUint32(bytes.Clone(body), sum))
	})
}

// checkDecoded decodes raw, stored under bk: never a panic; on an error no
// window; what decodes is well formed, re-encodes to a block that decodes
// the same, and each window is found by its key.
func checkDecoded(t *testing.T, b *Block, bk, raw []byte) {
	t.Helper()
	if err := DecodeBlock(b, bk, raw); err != nil {
		require.Empty(t, b.Windows)
		// FindInBlock rejects what DecodeBlock rejects (and never panics).
		_, found, ferr := FindInBlock(nil, bk, raw, []byte("k"))
		require.Error(t, ferr)
		require.False(t, found)
		return
	}
	again := AppendBlock(nil, bk, b.Windows)
	var b2 Block
	require.NoError(t, DecodeBlock(&b2, bk, again))
	sameWindows(t, b.Windows, b2.Windows)
	for i, w := range b.Windows {
		require.NotEmpty(t, w.Key, "key of window %d", i)
		require.GreaterOrEqual(t, len(w.Counters), 1, "tiers of window %d", i)
		require.LessOrEqual(t, len(w.Counters), MaxTiers, "tiers of window %d", i)
		cs, found, err := FindInBlock(nil, bk, raw, w.Key)
		require.NoError(t, err)
		require.True(t, found)
		if j := slicesIndexKey(b.Windows, w.Key); j == i {
			require.Equal(t, w.Counters, cs)
		}
		for _, c := range w.Counters {
			require.GreaterOrEqual(t, c.Count, int64(0))
		}
	}
}

func slicesIndexKey(ws []BlockWindow, key []byte) int {
	for i := range ws {
		if bytes.Equal(ws[i].Key, key) {
			return i
		}
	}
	return -1
}
