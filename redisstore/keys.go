package redisstore

import (
	"strconv"
	"strings"

	"github.com/ratedb/ratedb"
)

// Key layout. Every Redis key of one user key starts with
//
//	<prefix>{<escaped user key>}
//
// so that they all share one hash tag, the user key, and land in one
// Cluster slot. Then comes what the key holds:
//
//	:<a><scale ms>               a Window's counter (a = f, p or s: the algorithm)
//	:L<a><scale ms>,<scale ms>…  a Layered limiter's counters, all tiers in one key
//	:r<request id>               the reply to a counted call, kept for DedupWindow
//
// The user key is escaped so that it holds no '}' (which would end the hash
// tag early): '\' becomes `\\` and '}' becomes `\)`. The escaping is
// injective, so two user keys never share a Redis key.

// escapeKey returns key with '\' and '}' escaped (key unchanged when it has
// neither).
func escapeKey(key string) string {
	if !strings.ContainsAny(key, `\}`) {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i := 0; i < len(key); i++ {
		switch key[i] {
		case '\\':
			b.WriteString(`\\`)
		case '}':
			b.WriteString(`\)`)
		default:
			b.WriteByte(key[i])
		}
	}
	return b.String()
}

// algLetter names an algorithm in a key.
func algLetter(alg ratedb.Algorithm) byte {
	switch alg {
	case ratedb.PerKeyWindow:
		return 'p'
	case ratedb.StaggeredWindow:
		return 's'
	default:
		return 'f'
	}
}

// specSuffix is the part of a counter key after the hash tag.
func specSuffix(alg ratedb.Algorithm, scales []int64, layered bool) string {
	b := []byte{':'}
	if layered {
		b = append(b, 'L')
	}
	b = append(b, algLetter(alg))
	for i, sc := range scales {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, sc, 10)
	}
	return string(b)
}

// tagged returns the hash-tagged head of every Redis key of key.
func (s *Store) tagged(key string) string {
	return s.prefix + "{" + escapeKey(key) + "}"
}
