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

// TestKeyPrefixSelectsExactly: KeyPrefix(domain, entries...) starts the
// counted keys of exactly the descriptors of that domain whose first
// entries are those, never those of a domain, key or value that merely
// starts the same way.
func TestKeyPrefixSelectsExactly(t *testing.T) {
	type desc struct {
		domain string
		pairs  []string
		share  []string
	}
	descs := map[string]desc{
		"d a=b":          {"d", []string{"a", "b"}, nil},
		"d a=b c=x":      {"d", []string{"a", "b", "c", "x"}, nil},
		"d a=bc":         {"d", []string{"a", "bc"}, nil},
		"d ab=c":         {"d", []string{"ab", "c"}, nil},
		"d a=":           {"d", []string{"a", ""}, nil},
		"dd a=b":         {"dd", []string{"a", "b"}, nil},
		"d_a b=c":        {"d_a", []string{"b", "c"}, nil},
		"d a=b* (share)": {"d", []string{"a", "bzz"}, []string{"b*"}},
	}
	for _, tc := range []struct {
		name    string
		domain  string
		entries [][2]string
		want    []string
	}{
		{"domain", "d", nil, []string{"d a=b", "d a=b c=x", "d a=bc", "d ab=c", "d a=", "d a=b* (share)"}},
		{"other domain", "dd", nil, []string{"dd a=b"}},
		{"domain with _", "d_a", nil, []string{"d_a b=c"}},
		{"no such domain", "x", nil, nil},
		{"one entry", "d", [][2]string{{"a", "b"}}, []string{"d a=b", "d a=b c=x"}},
		{"empty value", "d", [][2]string{{"a", ""}}, []string{"d a="}},
		{"two entries", "d", [][2]string{{"a", "b"}, {"c", "x"}}, []string{"d a=b c=x"}},
		{"shared value", "d", [][2]string{{"a", "b*"}}, []string{"d a=b* (share)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := KeyPrefix(tc.domain, tc.entries...)
			var got []string
			for name, d := range descs {
				if strings.HasPrefix(countedKey(d.domain, entries(d.pairs...), d.share), p) {
					got = append(got, name)
				}
			}
			assert.ElementsMatch(t, tc.want, got)
		})
	}
}

// Only the entries a share_threshold matched are shared; the others keep
// their own values.
func TestCountedKeyShareOnlyMatchedEntries(t *testing.T) {
	share := []string{"", "files/*"}
	a := countedKey("d", entries("tenant", "a", "path", "files/x"), share)
	b := countedKey("d", entries("tenant", "b", "path", "files/y"), share)
	assert.NotEqual(t, a, b, "tenants a and b must not share a counter")
	assert.Equal(t, a, countedKey("d", entries("tenant", "a", "path", "files/z"), share))
}
