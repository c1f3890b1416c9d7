package rules

import (
	"strings"
	"unicode/utf8"
)

// matchPattern reports whether s matches pattern, where '*' matches any run
// of characters (including none) and every other byte matches itself. It
// runs in O(len(pattern)*len(s)) time at worst and never allocates.
func matchPattern(pattern, s string) bool {
	// Greedy match with backtracking to the last star only: enough for
	// patterns whose only metacharacter is '*'.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// literals is the number of characters of pattern that are not '*' (a
// pattern is valid UTF-8: Build refuses one that is not).
func literals(pattern string) int {
	return utf8.RuneCountInString(pattern) - strings.Count(pattern, "*")
}

// isExact reports whether pattern has no '*'.
func isExact(pattern string) bool { return !strings.Contains(pattern, "*") }
