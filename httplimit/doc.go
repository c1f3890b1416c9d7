// Package httplimit is HTTP middleware that limits the rate of requests
// with a ratedb limiter. It works with net/http and any router that takes a
// func(http.Handler) http.Handler (chi's r.Use among them):
//
//	perMinute, _ := db.Window(ratedb.FixedWindow, time.Minute)
//	m, err := httplimit.New(httplimit.Window(perMinute, 100), nil) // 100 per minute per client IP
//	...
//	http.ListenAndServe(":8080", m.Handler(mux))
//
// A *ratedb.Layered limits by several windows at once:
// httplimit.New(layered, opts).
//
// # Keys
//
// Options.KeyFunc decides which requests share a quota. KeyByIP (the
// default) keys by the direct peer's address, KeyByClientIP by the client's
// address behind trusted proxies, KeyByHeader by a header such as an API
// key (stored as a digest), KeyByRoute by the http.ServeMux pattern, and
// Keys combines several without ambiguity. Requests can be weighted
// (Options.Cost) or exempted (Options.Exempt: not counted, no headers), and
// given back once their handler has answered (Options.Undo, for example to
// count only failed logins).
//
// # Headers
//
// Every request that reaches the limiter gets, allowed or denied, the
// fields of draft-ietf-httpapi-ratelimit-headers-06:
//
//   - RateLimit-Limit: the quota of the window that bound the decision.
//   - RateLimit-Remaining: what is left of it after this request.
//   - RateLimit-Reset: seconds until that window ends, from the decision,
//     rounded up, and never more than the window's length (a limiter whose
//     clock runs ahead of Options.Clock, such as Redis's TIME, cannot
//     announce a longer wait).
//   - RateLimit-Policy: every window, "100;w=60" (100 per 60 seconds), or
//     "1;w=60, 10;w=3600" for a layered limiter, in tier order.
//
// For a layered limiter the window that binds is the denying tier that
// frees up last, or when allowed the tier with the least room left and, of
// several with as little (a request that filled two tiers), the one that
// frees up last, since nothing fits before it does (ratedb.Result.Tier).
// Options.LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset, the last one as a Unix time in seconds. A denied request gets status 429 (Options.OnLimited) and
// Retry-After: the seconds until the binding window ends, rounded up and at
// least 1. A request that does not fit is not counted: retrying after
// Retry-After is allowed unless others used the quota first.
//
// # Errors
//
// When the limiter or the KeyFunc fails, the request is answered with 503
// (Options.OnUnavailable) or, with Options.FailOpen, let through uncounted
// and without headers; a cost below 1 (ErrInvalidCost) is always answered
// with 503. Either way the error is counted
// (Middleware.Errors) and passed to Options.OnError; its text is never sent
// to the client. A request without a key (ErrNoKey, such as a missing
// API-key header with no fallback) is the client's fault: it gets 400
// (Options.OnNoKey) and is not counted as an error. Nor is a request whose
// context was cancelled before the KeyFunc or the limiter could decide
// (its client left, or closed its side of the connection and still reads;
// their error matches context.Canceled): it gets 503, even with FailOpen,
// never the empty 200 net/http sends for a handler that writes nothing,
// and is not passed to OnError. A request cancelled after the limiter
// decided is served as decided.
//
// # Security
//
// Forwarding headers (X-Forwarded-For, Forwarded, X-Real-IP) are written by
// the client unless a proxy overwrites them, so a client that controls its
// key controls its quota. KeyByIP ignores them. KeyByClientIP believes them
// only when the direct peer is in Proxies.Trusted, reads only the headers
// named in Proxies.Headers (X-Forwarded-For by default), and walks the list
// of hops from the right, stopping at the first address that is not a
// trusted proxy: entries a client prepends are never reached. Name only
// headers your proxies set on every request.
//
// An IPv6 client usually holds a whole /64 network and can pick a new
// address in it for every request, so IPv6 addresses are keyed by their /64
// (2001:db8:1:2::/64): rotating addresses within it gets a client no new
// quota. A client that holds a shorter prefix (a /56 or /48, as ISPs
// commonly delegate) has a quota per /64 it uses, up to 256 or 65,536 of
// them. IPv4 addresses are keyed as they are. Clients behind
// one NAT or carrier-grade NAT share a quota. An IPv6 address that carries
// an IPv4 client's address, in NAT64's well-known prefix 64:ff9b::/96 or a
// Teredo address (2001::/32), is keyed by that IPv4 address, so that the
// IPv4 clients behind a translator, or the clients of a Teredo server, do
// not all share one /64 (see KeyByIP).
//
// Keys may be personal data or secrets. The middleware never logs them or
// puts them in errors; header values are keyed by their SHA-256 digest, and
// keys longer than 256 bytes are replaced by their digest ("sha256:..."; a
// shorter key that starts with "sha256:" is digested too, so that no key can
// pass for another's digest). The limiter
// still stores keys, IP addresses included, in memory and in its database
// file.
//
// Middlewares that share a limiter share its counters for the same key,
// whatever their limits: DB.Window returns the same *ratedb.Window for the
// same algorithm and scale. Separate them with Keys(KeyConst("name"), ...).
package httplimit
