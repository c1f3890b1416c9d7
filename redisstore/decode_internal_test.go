package redisstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ratedb/ratedb"
)

// FuzzDecodeRead feeds readScript replies with arbitrary stored values: no
// panic; an error matches ErrUnavailable; a decoded tier is either empty or
// open at now, ending at most one scale after it, with a non-negative
// count; a well-formed value decodes to what it says.
func FuzzDecodeRead(f *testing.F) {
	f.Add("5,1767225660000", int64(1767225600000), uint8(1), uint64(60000))
	f.Add("1,2,3,4", int64(0), uint8(2), uint64(1))
	f.Add("", int64(0), uint8(3), uint64(1000))
	f.Add("-1,5", int64(0), uint8(1), uint64(10))
	f.Add("9223372036854775807,9223372036854775807", int64(-1), uint8(1), uint64(1))
	f.Add("3,9223372036854775807", int64(9223372036854775000), uint8(1), uint64(1<<40))
	f.Add(",,", int64(0), uint8(1), uint64(1))
	f.Add("", int64(1)<<62, uint8(1), uint64(1)) // round trip ends past MaxCount are clamped
	f.Fuzz(func(t *testing.T, val string, now int64, n uint8, scale uint64) {
		tiers := int(n%17) + 1
		scales := make([]int64, tiers)
		for i := range scales {
			scales[i] = int64(scale%(1<<43)) + 1 + int64(i)
		}
		ts, err := decodeRead([]any{now, val}, scales)
		if err != nil {
			if !errors.Is(err, ratedb.ErrUnavailable) {
				t.Fatalf("error %v does not match ErrUnavailable", err)
			}
			return
		}
		if len(ts) != tiers {
			t.Fatalf("%d tiers, want %d", len(ts), tiers)
		}
		for i, s := range ts {
			if s.count < 0 || (s != tierState{} && s.end <= now) {
				t.Fatalf("tier %d: %+v at now %d", i, s, now)
			}
			if s != (tierState{}) && now <= math.MaxInt64-scales[i] && s.end > now+scales[i] {
				t.Fatalf("tier %d: %+v ends more than its scale %d after now %d", i, s, scales[i], now)
			}
		}
		// Round trip of what the scripts write: numbers within MaxCount of
		// zero, which are doubles exactly (Lua's numbers are).
		endAt := func(i int) int64 { return min(max(now/2, -MaxCount), MaxCount-16) + int64(i) }
		parts := make([]string, 0, 2*tiers)
		for i := 0; i < tiers; i++ {
			parts = append(parts, fmt.Sprint(int64(i)*7), fmt.Sprint(endAt(i)))
		}
		ts, err = decodeRead([]any{now, strings.Join(parts, ",")}, scales)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range ts {
			if end := endAt(i); end > now && (s.count != int64(i)*7 || s.end != capEnd(end, now, scales[i])) {
				t.Fatalf("tier %d: %+v", i, s)
			}
		}
	})
}

// FuzzDecodeCount feeds countScript replies of arbitrary shape and values:
// no panic, and an error matches ErrUnavailable.
func FuzzDecodeCount(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0}, uint8(1), uint8(5))
	f.Add([]byte{}, uint8(2), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, n uint8, length uint8) {
		tiers := int(n%17) + 1
		reply := make([]any, int(length)%64)
		for i := range reply {
			if len(data) >= 8 {
				reply[i] = int64(binary.LittleEndian.Uint64(data))
				data = data[8:]
			} else if len(data) > 0 {
				reply[i] = string(data[:1]) // a wrong type
				data = data[1:]
			} else {
				reply[i] = int64(i)
			}
		}
		allowed, _, ts, err := decodeCount(reply, tiers)
		if err != nil {
			if !errors.Is(err, ratedb.ErrUnavailable) {
				t.Fatalf("error %v does not match ErrUnavailable", err)
			}
			return
		}
		if len(reply) != 2+3*tiers || len(ts) != tiers {
			t.Fatalf("accepted a reply of %d items for %d tiers", len(reply), tiers)
		}
		if allowed != (reply[0] == int64(1)) {
			t.Fatalf("allowed %v from %v", allowed, reply[0])
		}
	})
}

// FuzzDecodeRefund feeds refundScript replies of arbitrary shape and
// values for one to three tiers: no panic, an error matches
// ErrUnavailable, and every decoded tier is either no window (0, 0) or a
// non-negative count with an end.
func FuzzDecodeRefund(f *testing.F) {
	f.Add(int64(1767225600000), int64(3), int64(1767225660000), uint8(3), uint8(1))
	f.Add(int64(0), int64(0), int64(0), uint8(3), uint8(1))
	f.Add(int64(0), int64(-1), int64(5), uint8(3), uint8(1))
	f.Add(int64(0), int64(2), int64(0), uint8(3), uint8(0)) // one tier: a count without a window
	f.Add(int64(1767225600000), int64(3), int64(1767225660000), uint8(5), uint8(2))
	f.Fuzz(func(t *testing.T, now, count, end int64, length, tiers uint8) {
		n := 1 + int(tiers)%3
		reply := []any{now, count, end, count, end, int64(0), int64(0), int64(1)}[:int(length)%9]
		ts, err := decodeRefund(reply, n)
		if err != nil {
			if !errors.Is(err, ratedb.ErrUnavailable) {
				t.Fatalf("error %v does not match ErrUnavailable", err)
			}
			return
		}
		if len(ts) != n || len(reply) != 1+2*n {
			t.Fatalf("decoded %d tiers of %d from %v", len(ts), n, reply)
		}
		for i, s := range ts {
			if s.count < 0 || s.end < 0 || (s.end == 0 && s.count != 0) {
				t.Fatalf("tier %d decoded count %d, end %d", i, s.count, s.end)
			}
			if s.count != reply[1+2*i] || s.end != reply[2+2*i] {
				t.Fatalf("tier %d decoded %d, %d from %v", i, s.count, s.end, reply)
			}
		}
	})
}

// The decoders refuse what no script writes, field by field.
func TestDecodersRefuseImpossibleReplies(t *testing.T) {
	if _, _, _, err := decodeCount([]any{int64(1), int64(0), int64(-1), int64(10), int64(1)}, 1); err == nil {
		t.Error("decodeCount accepted a negative count")
	}
	if _, err := decodeRefund([]any{int64(0), int64(2), int64(0)}, 1); err == nil {
		t.Error("decodeRefund accepted a count without a window")
	}
	// A window ending exactly at now has ended: [start, end).
	ts, err := decodeRead([]any{int64(100), "3,100"}, []int64{50})
	if err != nil {
		t.Fatal(err)
	}
	if ts[0] != (tierState{}) {
		t.Errorf("a window ending at now decoded as open: %+v", ts[0])
	}
}
