package redisstore

// Tests added after mutation testing (TestGap...): each fails with one
// deliberate bug that the rest of the suite let through.

import (
	"testing"
)

// The decoders refuse what no script writes, field by field.
func TestGapDecodersRefuseImpossibleReplies(t *testing.T) {
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
