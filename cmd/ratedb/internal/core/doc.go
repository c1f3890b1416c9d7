// Package core is the service's one decision core: a set of checks, each a
// limit (rule name, algorithm, one window or tiers) applied to a counted key
// with a cost, goes in; per-check results and one overall decision come out.
// The protocol adapters (the HTTP JSON API, the Envoy gRPC service) translate
// requests into checks and decisions into answers; they never decide
// anything themselves, so they cannot disagree.
//
// # Semantics
//
//   - A set of checks is decided all-or-nothing: if any enforced check is
//     over its limit, no check of the set is counted.
//   - A check of cost 0 is a peek: it reports the key's state and whether a
//     hit of cost 1 would fit now, and counts nothing.
//   - A shadow check is decided and counted like any other, but its denial
//     never denies the set (it is reported with Shadow set). A shadow check
//     that is over its limit counts nothing, as no check may exceed a limit.
//   - Quota checks (Limit.Quota) are soft: one over its limit is reported
//     and counts nothing, and they deny the set only when every quota
//     check of the set is over its limit.
//   - A store failure is returned as an error wrapping ratedb.ErrUnavailable
//     (or the store's own error); with Options.FailOpen, a failure wrapping
//     ratedb.ErrUnavailable instead allows the set and sets
//     Decision.FailedOpen. A failure once the caller has given up (its
//     context ended or its deadline passed: CallerGaveUp) is no store
//     failure: it is returned, never failed open, and not reported to the
//     Observer as a store error. The calls that count a decided set do not
//     get the caller's context: their failure is the store's either way.
//
// # Concurrency
//
// A single check is one limiter Hit, which the store makes atomic. A set of
// several checks takes striped per-key locks in a fixed (sorted) order,
// reads every key's count (a peek), and only if every enforced check fits
// hits them all while still holding the locks. Single checks take their
// key's stripe in shared mode, so they run in parallel with each other but
// never between a set's peek and its hits. The locks are in-process: with a
// shared Redis store and several service instances, another instance can
// count a key between the peek and the hit. The hit is then denied, so the
// set is denied and the hits it already counted are undone: a denied set
// counts nothing across instances too.
package core
