// Package grpcapi serves Envoy's rate limit protocol
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over gRPC.
// It is a thin adapter: it matches each descriptor against an
// envoyproxy/ratelimit YAML config (package envoyconf), turns the matches
// into checks for the service's one decision core (package core), and turns
// the core's decision back into a RateLimitResponse. It decides nothing
// itself.
//
// # Semantics
//
//   - domain and at least one descriptor are required (INVALID_ARGUMENT
//     otherwise). A descriptor that matches no rule, or whose domain is not
//     configured, answers OK with no current_limit. The domain, keys and
//     values are taken byte for byte, UTF-8 or not: Envoy copies header
//     values, which may hold bytes 0x80-0xFF, into descriptor values as
//     they are, and the server's codec (NewGRPCServer) decodes the strings
//     of a RateLimitRequest that protobuf-go would refuse as not UTF-8.
//     Such a value is matched and counted by its exact bytes like any
//     other. A message that is not valid protobuf for any other reason
//     never reaches the Server: grpc-go answers INTERNAL itself.
//   - The request's hits_addend is the cost of each descriptor; 0 means 1.
//     A descriptor's own hits_addend overrides it; 0 checks without
//     counting (OK if one more hit would fit now).
//   - A descriptor's limit override (requests_per_unit, unit) replaces the
//     config's rule whenever the domain is configured; it is never in
//     shadow mode.
//   - All descriptors of a request are decided together, all-or-nothing: if
//     one is over its limit, none is counted. Options.Independent decides
//     each descriptor on its own instead, as envoyproxy/ratelimit does.
//   - A denied hit is never counted (envoyproxy/ratelimit counts it unless
//     STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT is set), so a client that keeps
//     calling while denied does not extend its own penalty.
//   - shadow_mode rules are counted and decided, but always answer OK.
//     quota_mode rules are soft limits, as in envoyproxy/ratelimit since
//     March 2026: one over its limit answers OVER_LIMIT in its own status
//     and counts nothing, and the request is over the limit only if every
//     quota_mode descriptor of it is (or an enforced one is). unlimited rules answer OK with limit_remaining 2^32-1 and no
//     current_limit, and count nothing.
//   - A store failure answers UNAVAILABLE (Envoy's failure_mode_deny then
//     decides whether the request passes). A caller that gave up (its
//     context ended or its deadline passed) while the store's call ran is
//     not a store failure: CANCELED or DEADLINE_EXCEEDED, never logged as
//     a store failure nor failed open.
//   - is_negative_hits gives the descriptor's hits back (a refund): its
//     count in the current window falls by the hits, never below zero, and
//     the descriptor answers OK with what remains. A refund never denies
//     the request and, like a hit, is applied only if the request is
//     allowed.
//
// Descriptor values may be personal data (client addresses, user ids): they
// are never logged and never appear in errors.
package grpcapi
