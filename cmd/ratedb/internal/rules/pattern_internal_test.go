package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMatchPattern(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"", "", true},
		{"", "a", false},
		{"premium-*", "premium-", true},
		{"premium-*", "premium-42", true},
		{"premium-*", "premiu", false},
		{"premium-*", "xpremium-1", false},
		{"/api/v1/bulk/*", "/api/v1/bulk/upload", true},
		{"/api/v1/bulk/*", "/api/v1/order", false},
		{"*-admin", "ops-admin", true},
		{"*-admin", "ops-admins", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYc!", false},
		{"**", "x", true},
		{"user123", "user123", true},
		{"user123", "user1234", false},
		{"api:bulk:*", "api:bulk:export", true},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, matchPattern(c.pattern, c.s), "%q ~ %q", c.pattern, c.s)
	}
}

func FuzzMatchPattern(f *testing.F) {
	f.Add("a*b", "axxb")
	f.Add("*", "")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		got := matchPattern(pattern, s)
		if isExact(pattern) && got != (pattern == s) {
			t.Fatalf("exact %q ~ %q = %v", pattern, s, got)
		}
		if got && len(s) < literals(pattern) {
			t.Fatalf("%q matched the shorter %q", pattern, s)
		}
		if !matchPattern("*"+pattern+"*", s) && got {
			t.Fatalf("widening %q lost %q", pattern, s)
		}
	})
}
