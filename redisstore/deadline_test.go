package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
