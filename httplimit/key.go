package httplimit

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// A KeyFunc returns the rate-limit key of a request: requests with the same
// key share a quota. It returns an error wrapping ErrNoKey when the request
// lacks what the key is built from (the middleware then rejects it with
// Options.OnNoKey); any other error is handled by the error policy (see
// Options.FailOpen). An empty key counts as ErrNoKey.
//
// Keys may be personal data (IP addresses, account names) or secrets (API
// keys): the middleware never logs them or puts them in errors, but the
// limiter stores them, in the database file too. Keys longer than 256 bytes
// are replaced by their SHA-256 digest before they reach the limiter.
//
// A KeyFunc must be safe for concurrent use.
type KeyFunc func(r *http.Request) (string, error)

// KeyByIP keys a request by the IP address of its direct peer,
// r.RemoteAddr, ignoring every forwarding header. IPv4 addresses are used
// as they are; IPv6 addresses are folded to their /64 network, since one
// client usually holds a whole /64 and could otherwise switch addresses at
// will: a client rotating its address within its /64 keeps one key. A
// client that holds a shorter prefix (ISPs and tunnel brokers commonly
// delegate a /56 or a /48) has one key per /64 it uses, up to 256 or
// 65,536 quotas; if that matters, write a KeyFunc that folds to a shorter
// prefix. An IPv6 address that carries an IPv4 client's address is keyed by
// that IPv4 address, as the client is when it connects over IPv4: one in
// NAT64's well-known prefix 64:ff9b::/96 (RFC 6052; a translator in front of
// an IPv6-only server shows IPv4 clients so) by its last 32 bits, and a
// Teredo address (2001::/32, RFC 4380) by the client's public IPv4 address
// it embeds. Folded to /64 they would share a quota: every IPv4 client
// behind the translator, every client of one Teredo server. Other NAT64
// prefixes (RFC 8215's 64:ff9b:1::/48, a network-specific prefix) cannot be
// recognised and are folded to /64 like any IPv6 address; write a KeyFunc
// that reads your prefix's embedded address. It returns ErrNoAddress when
// RemoteAddr holds no IP address.
//
// Behind a reverse proxy every request comes from the proxy: use
// KeyByClientIP.
func KeyByIP(r *http.Request) (string, error) {
	a, err := peerAddr(r)
	if err != nil {
		return "", err
	}
	return foldIP(a), nil
}

// KeyByClientIP keys a request by its client's IP address as p.ClientIP
// finds it, folded as KeyByIP does. With no trusted proxies it is KeyByIP.
// p is copied. It panics if p holds an invalid prefix or header name (see
// Proxies.Trusted and Proxies.Headers).
func KeyByClientIP(p Proxies) KeyFunc {
	q := p.normalize()
	return func(r *http.Request) (string, error) {
		a, err := q.clientIP(r)
		if err != nil {
			return "", err
		}
		return foldIP(a), nil
	}
}

// KeyByHeader keys a request by the value of the named header, for example
// an API key in "X-API-Key". The key is the SHA-256 digest of the value
// ("sha256:" and its unpadded base64url encoding), never the value itself,
// so that secrets are not written to the database file. Used alone, it is
// stored digested once more, as every key that starts with "sha256:" is
// (see the package documentation, Security): the limiter counts the value
// v under "sha256:" + base64url(SHA-256("sha256:" + base64url(SHA-256(v)))),
// and will, since another key would reset every quota. A request without
// the header (or with an empty value) is keyed by fallback, for example
// KeyByIP; with a nil fallback it is rejected with ErrNoKey.
//
// The header is whatever the client sends: an unauthenticated client can
// pick a fresh value, and so a fresh quota, for every request (combining it
// with the address in Keys does not help). Key by a header only when an
// earlier handler has checked it, or put a second middleware keyed by
// address in front.
//
// KeyByHeader("Host") keys by http.Request.Host: net/http's server moves the
// Host header there and removes it from Request.Header.
//
// It panics if name is not a header field name: empty, or holding a
// character other than a letter, a digit or one of !#$%&'*+-.^_`|~ (a
// space, a colon). No request carries such a header (net/http's server
// refuses one that does), so every request would silently be keyed by
// fallback, or rejected without one.
func KeyByHeader(name string, fallback KeyFunc) KeyFunc {
	if !validHeaderName(name) {
		panic(fmt.Sprintf("httplimit: KeyByHeader with %q, which is not a header field name", name))
	}
	name = http.CanonicalHeaderKey(name)
	value := func(r *http.Request) string { return r.Header.Get(name) }
	if name == "Host" {
		value = func(r *http.Request) string { return r.Host }
	}
	return func(r *http.Request) (string, error) {
		if v := value(r); v != "" {
			return digest(v), nil
		}
		if fallback == nil {
			return "", ErrNoKey
		}
		return fallback(r)
	}
}

// validHeaderName reports whether name is a header field name: a token of
// RFC 9110 (section 5.6.2), one or more letters, digits and
// !#$%&'*+-.^_`|~.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// KeyByRoute keys a request by the pattern of the http.ServeMux route that
// matched it (http.Request.Pattern, such as "GET /items/{id}"), so that
// every route has its own quota. It returns ErrNoRoute when the pattern is
// empty: ServeMux sets it only before calling the handler it routes to, so
// the middleware must wrap the route's handler, not the mux. Routers other
// than ServeMux (chi among them) do not set it; write a KeyFunc that reads
// their own route pattern instead.
func KeyByRoute(r *http.Request) (string, error) {
	if r.Pattern == "" {
		return "", ErrNoRoute
	}
	return r.Pattern, nil
}

// KeyConst returns a KeyFunc that keys every request by name. Combined with
// other KeyFuncs by Keys it gives a middleware counters of its own on a
// limiter that other middlewares share. It panics if name is empty.
func KeyConst(name string) KeyFunc {
	if name == "" {
		panic("httplimit: KeyConst with an empty name")
	}
	return func(*http.Request) (string, error) { return name, nil }
}

// Keys combines key functions: a request's key is built from all their
// keys, in order, each prefixed with its length ("3:abc5:hello"), so that
// different tuples of component keys always give different keys ("a|b"
// then "c" never equals "a" then "b|c"). The first error is returned as it
// is, and an empty component key is ErrNoKey, as an empty key is for a
// KeyFunc used alone (otherwise every request without, say, a user name
// would share one key). Keys panics when given no KeyFunc or a nil one.
func Keys(fns ...KeyFunc) KeyFunc {
	if len(fns) == 0 {
		panic("httplimit: Keys with no KeyFunc")
	}
	for _, f := range fns {
		if f == nil {
			panic("httplimit: Keys with a nil KeyFunc")
		}
	}
	fns = append([]KeyFunc(nil), fns...)
	return func(r *http.Request) (string, error) {
		var b []byte
		for _, f := range fns {
			k, err := f(r)
			if err != nil {
				return "", err
			}
			if k == "" {
				return "", ErrNoKey
			}
			b = appendComponent(b, k)
		}
		return string(b), nil
	}
}

// appendComponent appends k to b as one component of a composite key: its
// length in decimal, a colon, then k. The encoding is prefix-free, so a
// sequence of components decodes in exactly one way.
func appendComponent(b []byte, k string) []byte {
	b = strconv.AppendInt(b, int64(len(k)), 10)
	b = append(b, ':')
	return append(b, k...)
}

// maxRawKey is the longest key passed to the limiter as it is; longer keys
// are replaced by their digest. It is well under ratedb.MaxKeyLen, so that a
// long key built from request data can neither fail the limiter (which
// would make every such request an error, and with FailOpen unlimited) nor
// take much memory.
const maxRawKey = 256

// storeKey returns the key passed to the limiter for key: key itself, or
// its digest if it is longer than maxRawKey or starts with the digests'
// "sha256:" (so that a client that controls a key cannot send the digest of
// another, longer key as its own and share that key's quota).
func storeKey(key string) string {
	if len(key) <= maxRawKey && !strings.HasPrefix(key, digestPrefix) {
		return key
	}
	return digest(key)
}

// digestPrefix starts every digest.
const digestPrefix = "sha256:"

// digest returns "sha256:" and the unpadded base64url SHA-256 digest of s.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return digestPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}
