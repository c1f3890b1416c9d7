package grpcapi

import (
	"crypto/sha256"
	"encoding/binary"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/ratedb/ratedb"
)

// Counted keys of the Envoy protocol start with this prefix; the HTTP API's
// keys never do (see keyPrefix's test), so the two protocols never share a
// counter by accident.
const (
	keyPrefix       = "\x00envoy\x00"
	hashedKeyPrefix = "\x00envoy#"
)

// countedKey is the key a descriptor counts under: the domain and every
// entry's key and value, each length-prefixed so that no two descriptors
// share a key (unlike envoyproxy/ratelimit's "_"-joined cache keys). share,
// when not nil, replaces entry values by share_threshold patterns. A key
// longer than ratedb.MaxKeyLen is replaced by its SHA-256.
func countedKey(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry, share []string) string {
	n := len(keyPrefix) + binary.MaxVarintLen64 + len(domain)
	for _, e := range entries {
		n += 2*binary.MaxVarintLen64 + len(e.GetKey()) + len(e.GetValue())
	}
	b := make([]byte, 0, n)
	b = append(b, keyPrefix...)
	b = appendString(b, domain)
	for i, e := range entries {
		b = appendString(b, e.GetKey())
		v := e.GetValue()
		if i < len(share) && share[i] != "" {
			v = share[i]
		}
		b = appendString(b, v)
	}
	if len(b) > ratedb.MaxKeyLen {
		sum := sha256.Sum256(b)
		return hashedKeyPrefix + string(sum[:])
	}
	return string(b)
}

// KeyPrefix returns the bytes that every counted key of the Envoy domain
// starts with, followed by entries (each a key and a value, in a
// descriptor's order; a value shared by share_threshold is its pattern):
// exactly the keys of the descriptors whose first entries are these start
// with it, since each part is length-prefixed. A counted key longer than
// ratedb.MaxKeyLen is stored as its SHA-256 and starts with no such prefix.
// `ratedb inspect --envoy-domain` selects a domain's windows with it.
func KeyPrefix(domain string, entries ...[2]string) string {
	b := []byte(keyPrefix)
	b = appendString(b, domain)
	for _, e := range entries {
		b = appendString(b, e[0])
		b = appendString(b, e[1])
	}
	return string(b)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
