package ratedb

import (
	"encoding/binary"
	"testing"
)

// More tests for gaps that mutation testing of the file safety code (the
// page audit, rebuild and Verify) found: each fails with the deliberate bug
// it names.

// TestGapCheckPageRefusesEmptyBranch: a branch page with no elements leads
// nowhere (bbolt never writes one; a look-up in it reads an element that
// is not there), so the audit counts it as damaged; an empty leaf is a
// sound empty bucket, and a branch of one element is sound. (Mutant:
// checkPage accepted a branch page whose count is 0.)
func TestGapCheckPageRefusesEmptyBranch(t *testing.T) {
	const id, ps = 7, 512
	branch := func(keys ...string) []byte {
		le := binary.LittleEndian
		b := make([]byte, ps)
		le.PutUint64(b, id)
		le.PutUint16(b[8:], pageBranch)
		le.PutUint16(b[10:], uint16(len(keys)))
		data := pageHeader + len(keys)*elemSize
		for i, k := range keys {
			e := b[pageHeader+i*elemSize:]
			le.PutUint32(e[0:], uint32(data-(pageHeader+i*elemSize)))
			le.PutUint32(e[4:], uint32(len(k)))
			le.PutUint64(e[8:], uint64(id+1+i))
			data += copy(b[data:], k)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		page []byte
		want bool
	}{
		{"empty branch", branch(), false},
		{"branch of one element", branch("a"), true},
		{"empty leaf", leafPage(id, ps), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkPage(tc.page, id, false, nil, nil); got != tc.want {
				t.Fatalf("checkPage = %t, want %t", got, tc.want)
			}
		})
	}
}
