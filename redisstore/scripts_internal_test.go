package redisstore

import (
	"strconv"
	"strings"
	"testing"
)

// The count scripts spell MaxCount as a literal.
func TestScriptMaxCount(t *testing.T) {
	for _, sc := range []*script{countScript, windowScript} {
		if !strings.Contains(sc.src, " "+strconv.FormatInt(MaxCount, 10)+" ") {
			t.Fatalf("a count script does not use MaxCount (%d)", MaxCount)
		}
	}
}
