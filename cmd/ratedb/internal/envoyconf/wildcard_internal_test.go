package envoyconf

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzWildcardMatch checks wildcard.match against a reference that turns
// the pattern into a regular expression: each "*" any run of bytes, the
// rest literal.
func FuzzWildcardMatch(f *testing.F) {
	for _, c := range [][2]string{
		{"k_bar*b", "k_barab"}, {"k_bar*b", "k_barb"}, {"k_bar*b", "k_bara"},
		{"k_foo*bar*baz", "k_foo1bar2baz"}, {"k_foo*bar*baz", "k_foobaz"},
		{"k_ab*ba", "k_aba"}, {"k_ab*ba", "k_abba"}, {"k_**", "k_"}, {"*", ""},
		{"k_a*a*a", "k_aaa"}, {"k_a*a*a", "k_aa"},
		// Two middle parts that could overlap: each must be found after
		// the end of the one before, not where it starts (found by
		// mutation testing: rest[i:] instead of rest[i+len(p):] passed).
		{"k_*ab*ab*", "k_ab"}, {"k_*ab*ab*", "k_abab"}, {"k_*aa*aa*", "k_aaa"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, pattern, composite string) {
		// The reference's regexp reads UTF-8 (the match works on bytes
		// either way).
		if !strings.Contains(pattern, "*") || !utf8.ValidString(pattern) || !utf8.ValidString(composite) {
			return
		}
		parts := strings.Split(pattern, "*")
		quoted := make([]string, len(parts))
		for i, p := range parts {
			quoted[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile(`(?s)\A` + strings.Join(quoted, ".*") + `\z`)
		w := wildcard{composite: pattern, parts: parts}
		if got, want := w.match(composite), re.MatchString(composite); got != want {
			t.Fatalf("pattern %q, composite %q: match %v, reference %v", pattern, composite, got, want)
		}
	})
}
