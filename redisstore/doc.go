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
// key is written together with its expiry (SET ... PXAT, the end of its
// latest window on Redis's clock; PX with LocalClock): no key is ever left
// without a TTL. A Layered limiter keeps all its tiers in one Redis key, and
// every key of one user key carries the same hash tag (the user key, never
// the prefix), so each call touches one slot of a Redis Cluster.
//
// # Failures
//
// A call that Redis does not answer within Options.Timeout, or that fails,
// returns an error matching ratedb.ErrUnavailable: no decision was made.
// One that ran out of time also matches context.DeadlineExceeded (or the
// caller's ctx.Err()) and wraps the last Redis reply or network error it
// met, if any (a BUSY Redis, a read that timed out), when go-redis returned
// it: a deadline that passes during go-redis's own pause between retries,
// or while it opens a connection, leaves the context's error alone (see
// Options.Timeout for which calls keep what). A call is not sent at all,
// and returns what the embedded DB returns, when its arguments are invalid
// (ratedb.ErrInvalidArgument) or its ctx has already ended: then the
// context's error alone (context.Canceled or context.DeadlineExceeded), not
// ErrUnavailable.
// A Redis error reply is passed on as it is, except for the arguments Redis
// quotes back in some ("ERR unknown command 'evalsha', with args beginning
// with: ...", when scripting is renamed away): they hold the key, and are
// cut off, so that no error holds a key.
// Whether to let the request through (fail open) or not is the caller's
// choice; httplimit's Options.FailOpen is one. The store enforces the
// timeout itself, whatever the client's options say.
//
// # Retries
//
// go-redis retries a command after some network errors (the client's
// MaxRetries, 3 by default), even when the first attempt ran and only its
// reply was lost: a counting script run twice would count twice. By default
// the Store therefore sends counting calls (Hit, Inc) as commands go-redis
// must not resend once they may have reached Redis; such a call returns
// ErrUnavailable, having counted at most once. With Options.DedupWindow,
// each counting call instead carries a request id that the script
// remembers, with its reply, for that long: go-redis may retry, and a retry
// of a call that was counted returns the first reply instead of counting
// again.
//
// # Time
//
// By default (ServerClock) the scripts read the time with Redis's TIME
// command, so instances whose clocks disagree still agree on every window.
// This is safe with replication: Redis 7 replicates a script's effects, not
// the script. LocalClock makes the caller's clock the time source instead.
//
// On a Redis Cluster, TIME is the clock of the node that holds the key's
// slot: each key's windows follow its own node's clock. Keys on nodes whose
// clocks disagree open and end their windows that much apart (two
// FixedWindow keys no longer reset at the same instant), a slot that moves
// to another node (resharding, a failover) moves its keys' window
// boundaries by the two nodes' skew, and Options.OnTime reports each call's
// own node's time: a caller that keeps one offset to Redis's clock for all
// calls mixes the nodes' clocks. Keep the nodes' clocks in sync (NTP).
//
// Time can still go back: a LocalClock's f stepped back, or with ServerClock
// a failover to a server whose clock is behind, or the Redis host's own
// clock stepped back. TIME is Redis's wall clock, so unlike the embedded
// DB, which runs on the monotonic clock while open, ServerClock follows
// every step of the Redis host's clock (an NTP step, a hand-set clock): a
// step forward ends windows early, as that much downtime would, and a step
// back is handled as below. As in the embedded DB, a
// window that ends more than one scale after now is then cut back to end one
// scale after now (a one-second limit never denies for an hour), and a
// call that writes the key stores the cut end: the window ends there, and
// the next hit after it opens a new one, which may end when the cut one did
// before the cut (see Window.Undo).
//
// See the README section "Going multi-node" for the assumed Redis setup and
// what a failover or restart without persistence loses.
package redisstore
