package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// script is a Lua script, run with EVALSHA and, when Redis answers NOSCRIPT
// (its script cache is empty after every restart or failover), with EVAL.
type script struct {
	src  string
	hash string
}

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, hash: hex.EncodeToString(h[:])}
}

// noRetryCmd is a command go-redis must not send twice: after it may have
// reached Redis, a network error ends the call instead of a retry (go-redis
// still replays it when it failed before anything was written). Counting
// scripts run this way unless Options.DedupWindow makes their retries safe.
type noRetryCmd struct{ *redis.Cmd }

func (noRetryCmd) NoRetry() bool { return true }

// Redis Cluster redirections. A ClusterClient resends a script that a node
// answered with MOVED or ASK to the node the reply names (after ASKING, for
// ASK), up to ClusterOptions.MaxRedirects times, noRetryCmd or not. Such a
// resend never counts a call twice and is never wrongly deduplicated
// (go-redis v9 osscluster.go, ClusterClient.process; Redis 7 cluster.c,
// getNodeByQuery):
//
//   - Redis answers MOVED, ASK, TRYAGAIN and CLUSTERDOWN when it routes the
//     command, before running it: the node that redirected ran nothing, so
//     the resend is the script's first run.
//   - A resend holds the same arguments, so the same request id
//     (DedupWindow). A dedup key of that id exists only if this very call
//     ran: ids are unique (a random base per Store, a sequence per call),
//     and only the script writes one, in the run that counts.
//   - A call's keys share one hash tag, so its counter and its dedup key
//     are in one slot and move together (MIGRATE keeps their TTLs). While
//     the slot migrates, a node runs a script of both keys only if it holds
//     both: the migrating node answers TRYAGAIN if it holds one and ASK if
//     neither, the importing node (asked with ASKING) TRYAGAIN unless it
//     holds both. So the script reads its dedup key where it writes its
//     count. (A new call's dedup key exists nowhere yet: with DedupWindow,
//     counting calls of a migrating slot get TRYAGAIN, retried by eval,
//     until the slot has moved.)
//   - What may resend a script that ran is a retry after a lost reply:
//     go-redis sends none for a noRetryCmd (its cluster loop, the node's
//     client and the ASK pipeline all check NoRetry). With DedupWindow such a
//     retry, even one a MOVED sends to the slot's new node, finds the dedup
//     key there, as it moved with the count; only an expired one (past
//     DedupWindow) counts again. A failover keeps both keys or neither:
//     Redis replicates a script's writes as one transaction.

// eval runs sc once (EVALSHA, then EVAL on NOSCRIPT). With once, go-redis
// does not retry it after a network error; Redis error replies that mean
// the script did not run (TRYAGAIN during a Cluster slot migration, LOADING,
// BUSY, MASTERDOWN, CLUSTERDOWN) are retried here, with a backoff, while ctx
// lasts. When ctx ends after such a reply (during the backoff, or cutting
// short the next attempt), eval returns the last such reply: it is what
// happened. seen, if not nil, is given each of those replies as it comes,
// for a caller that stops waiting for eval.
func (s *Store) eval(ctx context.Context, sc *script, keys []string, args []any, once bool, seen *atomic.Pointer[error]) (any, error) {
	backoff := time.Millisecond
	var last error // the last reply saying the script did not run
	for {
		v, err := s.evalOnce(ctx, "evalsha", sc.hash, keys, args, once)
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			v, err = s.evalOnce(ctx, "eval", sc.src, keys, args, once)
		}
		if err == nil {
			return v, nil
		}
		if !notRun(err) {
			var re redis.Error
			if last != nil && ctx.Err() != nil && !errors.As(err, &re) {
				return nil, last // ctx cut this attempt short: no reply
			}
			return nil, err
		}
		last = err
		if seen != nil {
			seen.Store(&err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		if ctx.Err() != nil { // both were ready: send nothing past ctx
			return nil, err
		}
		backoff = min(2*backoff, 64*time.Millisecond)
	}
}

func (s *Store) evalOnce(ctx context.Context, verb, body string, keys []string, args []any, once bool) (any, error) {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, verb, body, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3) // the Cluster slot is the first key's
	var c redis.Cmder = cmd
	if once {
		c = noRetryCmd{cmd}
	}
	if err := s.c.Process(ctx, c); err != nil {
		return nil, withoutArgs(err)
	}
	return cmd.Val(), nil
}

// argsEcho is where Redis starts quoting a command's arguments back in an
// error reply: "ERR unknown command 'evalsha', with args beginning with:
// '<sha1>' '1' '<prefix>{<user key>}:f60000' ...", its answer when
// EVALSHA or EVAL is renamed or disabled (rename-command) or a proxy does
// not know it. The arguments hold the user key.
const argsEcho = "with args beginning with:"

// withoutArgs returns err, or, when it quotes the command's arguments
// (argsEcho), a Redis error of the same text up to argsEcho, so that no key
// reaches the caller's errors and logs.
func withoutArgs(err error) error {
	msg := err.Error()
	i := strings.Index(msg, argsEcho)
	if i < 0 {
		return err
	}
	return replyError(msg[:i+len(argsEcho)] + " (withheld: they hold the key)")
}

// replyError is a Redis error reply that withoutArgs cut short: a
// redis.Error, as the reply was.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks replyError as a redis.Error.
func (replyError) RedisError() {}

// notRun reports whether err is a Redis reply saying the script did not run
// and may be sent again.
func notRun(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range []string{"TRYAGAIN", "LOADING", "BUSY ", "MASTERDOWN", "CLUSTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
