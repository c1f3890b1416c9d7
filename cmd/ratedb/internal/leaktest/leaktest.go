// Package leaktest finds, for tests, a part of a secret that an error
// message quotes: the fuzz targets of the config parsers check with it that
// an error about a keys file given by mistake shows none of its keys.
package leaktest

import "strings"

// KeyWords returns the runs of text made of bytes an API key can hold
// (letters, digits and "-_+/=").
func KeyWords(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-_+/=", r))
	})
}

// Quotes returns a part of word, a run of bytes of an API key, that msg
// holds, if word is as long as a key (16 bytes or more) and msg holds 7
// bytes of it with a letter and a digit (yaml.v3 quotes 7 bytes of a long
// value; the messages' own words hold no digit, or no letter).
func Quotes(msg, word string) (string, bool) {
	if len(word) < 16 {
		return "", false
	}
	for i := 0; i+7 <= len(word); i++ {
		w := word[i : i+7]
		if strings.ContainsAny(w, "0123456789") && strings.ContainsAny(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") && strings.Contains(msg, w) {
			return w, true
		}
	}
	return "", false
}
