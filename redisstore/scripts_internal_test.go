package redisstore

import (
	"strconv"
	"strings"
	"testing"
)

// The count script spells MaxCount as a literal.
func TestScriptMaxCount(t *testing.T) {
	if !strings.Contains(countScript.src, " "+strconv.FormatInt(MaxCount, 10)+" ") {
		t.Fatalf("countScript does not use MaxCount (%d)", MaxCount)
	}
}
