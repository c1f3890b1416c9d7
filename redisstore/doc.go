// Package redisstore is a ratedb backend on Redis, for services that run on
// more than one machine and need one shared count per key.
//
// It offers the embedded DB's algorithms with the same answers: a Store's
// Window implements ratedb.Limiter and its Layered has the method set of
// *ratedb.Layered, so switching from the embedded DB is a one-line change:
//
//	w, err := db.Window(ratedb.FixedWindow, time.Minute)     // embedded
//	w, err := store.Window(ratedb.FixedWindow, time.Minute)  // Redis
//
// Every call is one Lua script run on the server (EVALSHA, falling back to
// EVAL after a restart or failover emptied the script cache), so a decision
// and its update are atomic however many processes share the key, and every
// key is written together with its expiry (SET ... PX): no key is ever left
// without a TTL. A Layered limiter keeps all its tiers in one Redis key, and
// every key of one user key carries the same hash tag (the user key, never
// the prefix), so each call touches one slot of a Redis Cluster.
//
// # Failures
//
// A call that Redis does not answer within Options.Timeout, or that fails,
// returns an error matching ratedb.ErrUnavailable: no decision was made.
// Whether to let the request through (fail open) or not is the caller's
// choice; httplimit's Options.FailOpen is one. The store enforces the
// timeout itself, whatever the client's options say.
//
// # Retries
//
// go-redis retries a command after some network errors (Options.MaxRetries
// of the client, 3 by default), and the first attempt may have been
// executed even though its reply was lost. Each counting call (Hit, Inc)
// therefore carries a request id: the script remembers the ids it counted,
// with their replies, for Options.DedupWindow, and a retry of a call that
// was already counted returns the first reply instead of counting again.
//
// # Time
//
// By default (ServerClock) the scripts read the time with Redis's TIME
// command, so instances whose clocks disagree still agree on every window.
// This is safe with replication: Redis 7 replicates a script's effects, not
// the script. LocalClock makes the caller's clock the time source instead.
//
// See the README section "Going multi-node" for the assumed Redis setup and
// what a failover or restart without persistence loses.
package redisstore
