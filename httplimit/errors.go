package httplimit

import "errors"

// Errors reported by httplimit. Match them with errors.Is. None of them
// contains a key or any other part of the request.
var (
	// ErrNoKey is returned by a KeyFunc when the request lacks what the key
	// is built from, such as a missing API-key header with no fallback (see
	// KeyByHeader). It is the client's fault: the middleware answers with
	// Options.OnNoKey (400 by default), and neither counts it in
	// Middleware.Errors nor reports it to Options.OnError. An empty key from
	// any KeyFunc is treated as ErrNoKey.
	ErrNoKey = errors.New("httplimit: request has no rate-limit key")

	// ErrNoRoute is returned by KeyByRoute for a request whose Pattern is
	// empty: the middleware runs outside the http.ServeMux that routes it, or
	// under a router that does not set http.Request.Pattern. It is a
	// configuration error, handled by the error policy.
	ErrNoRoute = errors.New("httplimit: request has no route pattern")

	// ErrNoAddress is returned by KeyByIP and KeyByClientIP when the
	// request's RemoteAddr is not an IP address (for example a Unix-socket
	// listener). It is a configuration error, handled by the error policy.
	ErrNoAddress = errors.New("httplimit: request has no remote IP address")

	// ErrInvalidCost is reported, wrapped, when Options.Cost returns a value
	// below 1. It is a programming error, handled by the error policy; use
	// Options.Exempt for requests that should not be counted.
	ErrInvalidCost = errors.New("httplimit: cost is not positive")
)
