// Package envoye2e holds end-to-end tests of `ratedb serve --grpc`: they
// build the real binary once, start it on loopback ports with a temporary
// state file and an envoyproxy/ratelimit config, and drive it with
// go-control-plane's generated RateLimitServiceClient. It has no code of
// its own.
package envoye2e
