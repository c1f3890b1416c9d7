package redisstore

import (
	"math"
	"strconv"
	"strings"
)

// Decoding of the scripts' replies, which come from the network: anything
// of the wrong shape (another program wrote our key, a script of another
// version) is an error matching ErrUnavailable, never a panic or a wrong
// decision. FuzzDecodeRead and FuzzDecodeCount cover them.

// decodeCount decodes countScript's reply for n tiers: {allowed, now, c1,
// e1, fits1, …}.
func decodeCount(v any, n int) (allowed bool, now int64, ts []tierState, err error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2+3*n {
		return false, 0, nil, badReply(v)
	}
	r := make([]int64, len(a))
	for i, x := range a {
		if r[i], ok = x.(int64); !ok {
			return false, 0, nil, badReply(v)
		}
	}
	ts = make([]tierState, n)
	for i := range ts {
		ts[i] = tierState{count: r[2+3*i], end: r[3+3*i], fits: r[4+3*i] == 1}
		if ts[i].count < 0 {
			return false, 0, nil, badReply(v)
		}
	}
	return r[0] == 1, r[1], ts, nil
}

// decodeRead decodes readScript's reply for tiers of the given scales (ms):
// {now, stored value}, the value being "c1,e1,c2,e2,…" or empty. Tiers
// whose window ended by now are zero; an end more than one scale after now
// is capped (capEnd).
func decodeRead(v any, scales []int64) ([]tierState, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return nil, badReply(v)
	}
	now, ok1 := a[0].(int64)
	val, ok2 := a[1].(string)
	if !ok1 || !ok2 {
		return nil, badReply(v)
	}
	n := len(scales)
	ts := make([]tierState, n)
	if val == "" {
		return ts, nil
	}
	f := strings.Split(val, ",")
	if len(f) != 2*n {
		return nil, badReply(v)
	}
	for i := range ts {
		c, ok1 := storedInt(f[2*i], false, n > 1)
		e, ok2 := storedInt(f[2*i+1], true, n > 1)
		if !ok1 || !ok2 {
			return nil, badReply(v)
		}
		if e > now {
			ts[i] = tierState{count: c, end: capEnd(e, now, scales[i])}
		}
	}
	return ts, nil
}

// storedInt parses one number of a stored value as the scripts' load does,
// so that Get and ExpiresAt read the values the writing calls read and
// refuse the others: decimal digits, after a minus sign if signed (an
// end), within MaxCount of zero (the scripts' Lua reads such numbers
// exactly, and the store writes no others), and for a value of several
// tiers only as encode writes them (no leading zero, no "-0").
func storedInt(s string, signed, canonical bool) (int64, bool) {
	d := s
	if signed && len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if d == "" {
		return 0, false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
	}
	x, err := strconv.ParseInt(s, 10, 64)
	if err != nil || x > MaxCount || x < -MaxCount || canonical && strconv.FormatInt(x, 10) != s {
		return 0, false
	}
	return x, true
}

// capEnd caps a window's end at one scale after now, as the scripts do
// (see scripts.go), whatever a reply's now.
func capEnd(end, now, scale int64) int64 {
	if now <= math.MaxInt64-scale && end > now+scale {
		return now + scale
	}
	return end
}

// decodeRefund decodes refundScript's reply {now, c1, e1, …} for n tiers,
// in storage order: a tier with end 0 had no open window (and count 0).
func decodeRefund(v any, n int) ([]tierState, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 1+2*n {
		return nil, badReply(v)
	}
	if _, ok := a[0].(int64); !ok {
		return nil, badReply(v)
	}
	ts := make([]tierState, n)
	for i := range ts {
		count, ok1 := a[1+2*i].(int64)
		end, ok2 := a[2+2*i].(int64)
		if !ok1 || !ok2 || count < 0 || end < 0 || (end == 0 && count != 0) {
			return nil, badReply(v)
		}
		ts[i] = tierState{count: count, end: end}
	}
	return ts, nil
}
