package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnavailable stops Redis (SIGKILL), pauses it (SIGSTOP) and blocks it
// (DEBUG SLEEP): every call must return ErrUnavailable within Timeout plus a
// small margin, never hang and never decide, and calls succeed again once
// Redis is back. Both kinds of client: one that ignores context deadlines
// on socket reads (go-redis's default: the Store's watchdog bounds the
// call) and one built with ContextTimeoutEnabled.
func TestUnavailable(t *testing.T) {
	const (
		timeout = 100 * time.Millisecond
		margin  = 150 * time.Millisecond // scheduling under -race on a busy machine
	)
	for _, cte := range []bool{false, true} {
		t.Run(fmt.Sprint("ContextTimeoutEnabled=", cte), func(t *testing.T) {
			srv := startServer(t, "--enable-debug-command", "yes")
			s, err := redisstore.New(srv.Client(t, &redis.Options{ContextTimeoutEnabled: cte}), &redisstore.Options{Timeout: timeout})
			require.NoError(t, err)
			w, err := s.Window(ratedb.FixedWindow, time.Minute)
			require.NoError(t, err)
			l, err := s.Layered(ratedb.PerKeyWindow, ratedb.Tier{Scale: time.Minute, Limit: 5})
			require.NoError(t, err)
			calls := map[string]func() error{
				"Hit":       func() error { _, err := w.Hit(ctx, "k", 5, 1); return err },
				"Inc":       func() error { _, err := w.Inc(ctx, "k", 1); return err },
				"Get":       func() error { _, err := w.Get(ctx, "k"); return err },
				"Set":       func() error { _, err := w.Set(ctx, "k", 1); return err },
				"ExpiresAt": func() error { _, err := w.ExpiresAt(ctx, "k"); return err },
				"Reset":     func() error { return w.Reset(ctx, "k") },
				"L.Hit":     func() error { _, err := l.Hit(ctx, "k", 1); return err },
				"L.Inc":     func() error { _, err := l.Inc(ctx, "k", 1); return err },
				"L.Get":     func() error { _, err := l.Get(ctx, "k"); return err },
				"L.Expires": func() error { _, err := l.ExpiresAt(ctx, "k"); return err },
				"L.Reset":   func() error { return l.Reset(ctx, "k") },
				"longer ctx": func() error {
					c, cancel := context.WithTimeout(ctx, time.Hour)
					defer cancel()
					_, err := w.Hit(c, "k", 5, 1)
					return err
				},
			}
			// down checks every call, several at once, while Redis is down.
			down := func(state string) {
				var wg sync.WaitGroup
				for name, call := range calls {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start := time.Now()
						err := call()
						took := time.Since(start)
						assert.ErrorIs(t, err, ratedb.ErrUnavailable, "%s: %s", state, name)
						assert.Less(t, took, timeout+margin, "%s: %s took %v", state, name, took)
					}()
				}
				wg.Wait()
			}
			// back waits until Redis answers again, then checks every call.
			back := func(state string) {
				deadline := time.Now().Add(10 * time.Second)
				for calls["Get"]() != nil {
					require.True(t, time.Now().Before(deadline), "%s: Redis never answered again", state)
					time.Sleep(10 * time.Millisecond) // polling an external process coming back
				}
				for name, call := range calls {
					assert.NoError(t, call(), "%s: %s", state, name)
				}
			}
			back("before")

			srv.Pause()
			down("paused")
			srv.Resume()
			back("resumed")

			sleeper := srv.Client(t, &redis.Options{MaxRetries: -1})
			slept := make(chan error, 1)
			go func() { slept <- sleeper.Do(ctx, "DEBUG", "SLEEP", "1").Err() }()
			waitBlocked(t, srv)
			down("DEBUG SLEEP")
			require.NoError(t, <-slept)
			back("after DEBUG SLEEP")

			srv.Stop()
			down("stopped")
			srv.Restart()
			back("restarted")
		})
	}
}

// waitBlocked waits until a DEBUG SLEEP has the server blocked: a PING
// with a short deadline gets no answer.
func waitBlocked(t *testing.T, srv *server) {
	c := srv.Client(t, &redis.Options{MaxRetries: -1, ContextTimeoutEnabled: true})
	deadline := time.Now().Add(5 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err := c.Ping(pctx).Err()
		cancel()
		if err != nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "DEBUG SLEEP never blocked the server")
	}
}
