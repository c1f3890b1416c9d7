package grpcapi

import (
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/stretchr/testify/assert"

	"github.com/ratedb/ratedb"
)

func entries(pairs ...string) []*ratelimitv3.RateLimitDescriptor_Entry {
	var out []*ratelimitv3.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &ratelimitv3.RateLimitDescriptor_Entry{Key: pairs[i], Value: pairs[i+1]})
	}
	return out
}

// TestCountedKeyUnambiguous: descriptors that envoyproxy/ratelimit's
// "_"-joined cache keys would confuse get distinct counters here, and no key
// can be an HTTP API key (those start with a rule name: a letter or digit).
func TestCountedKeyUnambiguous(t *testing.T) {
	keys := []string{
		countedKey("d", entries("a", "b_c"), nil),
		countedKey("d", entries("a_b", "c"), nil),
		countedKey("d_a", entries("b", "c"), nil),
		countedKey("d", entries("a", "b", "c", ""), nil),
		countedKey("d", entries("a", "bc"), nil),
		countedKey("d", entries("a", "b"), []string{"x*"}),
	}
	seen := map[string]bool{}
	for _, k := range keys {
		assert.False(t, seen[k], "collision: %q", k)
		seen[k] = true
		assert.True(t, strings.HasPrefix(k, keyPrefix))
	}
	assert.Equal(t, countedKey("d", entries("a", "x*"), nil), countedKey("d", entries("a", "anything"), []string{"x*"}),
		"share_threshold puts every value under one counter")

	long := countedKey("d", entries("k", strings.Repeat("v", ratedb.MaxKeyLen)), nil)
	assert.True(t, strings.HasPrefix(long, hashedKeyPrefix))
	assert.LessOrEqual(t, len(long), ratedb.MaxKeyLen)
	assert.NotEqual(t, long, countedKey("d", entries("k", strings.Repeat("v", ratedb.MaxKeyLen+1)), nil))
}
