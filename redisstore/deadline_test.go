package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
)

// "The Store enforces the timeout itself, whatever the client's options
// say": a client built with ContextTimeoutEnabled but ReadTimeout -2 (go-redis:
// "disables SetReadDeadline calls completely") never applies the context's
// deadline to its reads, so a call on a paused Redis must still come back
// within Timeout.
func TestTimeoutWithReadDeadlinesDisabled(t *testing.T) {
	srv := startServer(t)
	const timeout = 100 * time.Millisecond
	client := srv.Client(t, &redis.Options{ContextTimeoutEnabled: true, ReadTimeout: -2, MaxRetries: -1})
	s, err := redisstore.New(client, &redisstore.Options{Prefix: newPrefix(), Timeout: timeout})
	require.NoError(t, err)
	w, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = w.Hit(ctx, "k", 5, 1) // a connection in the pool
	require.NoError(t, err)

	srv.Pause()
	defer srv.Resume()
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := w.Hit(ctx, "k", 5, 1); done <- err }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ratedb.ErrUnavailable)
		require.Less(t, time.Since(start), timeout+time.Second)
	case <-time.After(3 * time.Second):
		srv.Resume()
		t.Fatalf("Hit on a paused Redis has not returned after 3 s (Timeout %v)", timeout)
	}
}

// A call whose deadline passes (the Store's Timeout or the caller's ctx)
// returns an error matching ErrUnavailable and context.DeadlineExceeded and
// wrapping what the call met if the Store knows it: the BUSY replies of a
// Redis running a long script, or, on a client that applies deadlines to
// its sockets, the read that timed out on a stopped Redis. Both kinds of
// client. Run it with -race too: the socket's timeout then often comes
// before the context's own timer, and the deadline must still be reported.
func TestDeadlineErrorKeepsCause(t *testing.T) {
	srv := startServer(t, "--busy-reply-threshold", "10")
	admin := srv.Client(t, &redis.Options{MaxRetries: -1})
	pinger := srv.Client(t, &redis.Options{MaxRetries: -1})
	const timeout = 100 * time.Millisecond
	isBusy := func(err error) bool {
		var re redis.Error
		return errors.As(err, &re) && strings.HasPrefix(re.Error(), "BUSY")
	}
	for _, cte := range []bool{false, true} {
		s, err := redisstore.New(srv.Client(t, &redis.Options{ContextTimeoutEnabled: cte}), &redisstore.Options{Prefix: newPrefix(), Timeout: timeout})
		require.NoError(t, err)
		w, err := s.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		warm := func() { // a connection in the pool: no dial under the deadline
			_, err := w.Hit(ctx, "k", 5, 1)
			require.NoError(t, err)
		}
		// call runs a Hit whose deadline is the Store's Timeout, or the
		// caller's shorter one.
		call := func(callerDeadline bool) error {
			c := ctx
			if callerDeadline {
				var cancel context.CancelFunc
				c, cancel = context.WithTimeout(ctx, timeout/2)
				defer cancel()
			}
			_, err := w.Hit(c, "k", 5, 1)
			return err
		}

		// Redis busy with a script answers BUSY to every other command
		// until SCRIPT KILL.
		warm()
		busy := make(chan error, 1)
		go func() {
			busy <- admin.Eval(context.Background(), "local i = 0 while true do i = i + 1 end", nil).Err()
		}()
		deadline := time.Now().Add(5 * time.Second)
		for !isBusy(pinger.Ping(ctx).Err()) {
			require.True(t, time.Now().Before(deadline), "the script never made Redis busy")
		}
		for _, callerDeadline := range []bool{false, true} {
			err := call(callerDeadline)
			name := fmt.Sprintf("ContextTimeoutEnabled=%v callerDeadline=%v busy", cte, callerDeadline)
			assert.ErrorIs(t, err, ratedb.ErrUnavailable, name)
			assert.ErrorIs(t, err, context.DeadlineExceeded, name)
			assert.True(t, isBusy(err), "%s: the BUSY reply is lost: %v", name, err)
		}
		require.NoError(t, pinger.ScriptKill(ctx).Err())
		<-busy

		// A stopped Redis answers nothing: a client that applies the
		// deadline to its socket reports the read's timeout; the other
		// one's read is still waiting, and only the deadline is known.
		for _, callerDeadline := range []bool{false, true} {
			warm()
			srv.Pause()
			err := call(callerDeadline)
			srv.Resume()
			name := fmt.Sprintf("ContextTimeoutEnabled=%v callerDeadline=%v stopped", cte, callerDeadline)
			assert.ErrorIs(t, err, ratedb.ErrUnavailable, name)
			assert.ErrorIs(t, err, context.DeadlineExceeded, name)
			if cte {
				assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "%s: the read's timeout is lost: %v", name, err)
			}
		}
	}
}

// What Options.Timeout's doc says of the calls go-redis retries itself (Get,
// ExpiresAt, State, and Hit and Inc with DedupWindow): on a stopped Redis, a
// client that applies deadlines to its sockets has its read cut short by the
// deadline; go-redis then retries, and its pause before the retry returns
// the context's error alone. The call's error matches ErrUnavailable and
// context.DeadlineExceeded but cannot wrap the read's timeout, unlike a Hit
// without DedupWindow (TestDeadlineErrorKeepsCause). Should a go-redis
// upgrade keep the cause, this test fails: update Options.Timeout's doc, the
// package doc and the README.
func TestDeadlineErrorOfACallGoRedisRetries(t *testing.T) {
	srv := startServer(t)
	const timeout = 100 * time.Millisecond
	s, err := redisstore.New(srv.Client(t, &redis.Options{ContextTimeoutEnabled: true}), &redisstore.Options{Prefix: newPrefix(), Timeout: timeout, DedupWindow: time.Second})
	require.NoError(t, err)
	w, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Get", func(c context.Context) error { _, err := w.Get(c, "k"); return err }},
		{"State", func(c context.Context) error { _, _, err := w.State(c, "k"); return err }},
		{"Hit with DedupWindow", func(c context.Context) error { _, err := w.Hit(c, "k", 1000, 1); return err }},
	} {
		for _, callerDeadline := range []bool{false, true} {
			name := fmt.Sprintf("%s callerDeadline=%v", c.name, callerDeadline)
			require.NoError(t, c.call(ctx), "%s: a connection in the pool, so that the read meets the deadline, not a dial", name)
			cctx := ctx
			var cancel context.CancelFunc = func() {}
			if callerDeadline {
				cctx, cancel = context.WithTimeout(ctx, timeout/2)
			}
			srv.Pause()
			err := c.call(cctx)
			srv.Resume()
			cancel()
			assert.ErrorIs(t, err, ratedb.ErrUnavailable, name)
			assert.ErrorIs(t, err, context.DeadlineExceeded, name)
			assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "%s: go-redis now returns the read's timeout after its retry pause: update the docs that say it is lost", name)
		}
	}
}
