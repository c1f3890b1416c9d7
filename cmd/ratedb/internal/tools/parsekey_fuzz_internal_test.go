package tools

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/record"
)

// FuzzParseKey feeds inspect's reading of a record key (parseKey, spec)
// arbitrary keys: it never panics, and a key it accepts is written back to
// the same bytes from what it read (the algorithm, layered or not, each
// scale that a time.Duration can hold, and the counted key, at least one
// byte).
func FuzzParseKey(f *testing.F) {
	scale := func(ms int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(ms)) }
	f.Add(append(append([]byte{1}, scale(3_600_000)...), "user-01"...))
	f.Add(append(append(append([]byte{0x81, 2}, scale(60_000)...), scale(3_600_000)...), "k"...))
	f.Add(append(append([]byte{3}, scale(86_400_000)...), "\xff\x00"...))
	f.Add(append([]byte{2}, scale(-1)...))
	f.Add([]byte{0x80})
	f.Add(append(append([]byte{0x81, 17}, bytes.Repeat(scale(1), 17)...), "k"...))
	codes := map[string]byte{}
	for c, name := range algNames {
		codes[name] = c
	}
	f.Fuzz(func(t *testing.T, k []byte) {
		w, key, ok := parseKey(k)
		if !ok {
			return
		}
		if key == "" || len(w.Scales) < 1 || len(w.Scales) > record.MaxTiers || (!w.Layered && len(w.Scales) != 1) {
			t.Fatalf("accepted %x: %+v, key %q", k, w, key)
		}
		code, known := codes[w.Algorithm]
		if !known {
			t.Fatalf("accepted %x with the algorithm %q", k, w.Algorithm)
		}
		var back []byte
		if w.Layered {
			back = append(back, code|0x80, byte(len(w.Scales)))
		} else {
			back = append(back, code)
		}
		p := len(back)
		for i, s := range w.Scales {
			ms := int64(binary.BigEndian.Uint64(k[p+8*i:]))
			if ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
				back = binary.BigEndian.AppendUint64(back, uint64(ms)) // no Duration holds it
				continue
			}
			d, err := time.ParseDuration(s)
			if err != nil || d != time.Duration(ms)*time.Millisecond {
				t.Fatalf("scale %d of %x reads %q (%v), not %d ms", i, k, s, err, ms)
			}
			back = binary.BigEndian.AppendUint64(back, uint64(d.Milliseconds()))
		}
		back = append(back, key...)
		if !bytes.Equal(back, k) {
			t.Fatalf("%x read as %+v and %q writes back as %x", k, w, key, back)
		}
	})
}
