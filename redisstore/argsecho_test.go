package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Redis whose scripting commands are renamed away (rename-command, as
// hardening guides and some managed services do) answers every call with
// "ERR unknown command 'evalsha', with args beginning with: ..." quoting
// the command's arguments, the Redis key and so the user key among them.
// No error of any method may carry that key: callers log these errors (the
// service logs them as "the store failed"). The error still matches
// ratedb.ErrUnavailable, is a redis.Error and says what Redis refused.
func TestUnknownCommandErrorHoldsNoKey(t *testing.T) {
	srv := startServer(t, "--rename-command", "EVALSHA", "", "--rename-command", "EVAL", "")
	ctx := context.Background()
	s, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second})
	require.NoError(t, err)
	w, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 10}, ratedb.Tier{Scale: time.Hour, Limit: 100})
	require.NoError(t, err)
	const key = "alice@example.com"
	res := ratedb.Result{Allowed: true, Limit: 10, Remaining: 9, ResetAt: time.Now().Add(time.Minute), Scale: time.Minute}
	calls := map[string]func() error{
		"Window.Hit":       func() error { _, err := w.Hit(ctx, key, 10, 1); return err },
		"Window.Inc":       func() error { _, err := w.Inc(ctx, key, 1); return err },
		"Window.Set":       func() error { _, err := w.Set(ctx, key, 1); return err },
		"Window.Refund":    func() error { _, _, err := w.Refund(ctx, key, 1); return err },
		"Window.Undo":      func() error { return w.Undo(ctx, key, res, 1) },
		"Window.Get":       func() error { _, err := w.Get(ctx, key); return err },
		"Window.ExpiresAt": func() error { _, err := w.ExpiresAt(ctx, key); return err },
		"Window.State":     func() error { _, _, err := w.State(ctx, key); return err },
		"Window.Reset":     func() error { return w.Reset(ctx, key) },
		"Layered.Hit":      func() error { _, err := l.Hit(ctx, key, 1); return err },
		"Layered.Inc":      func() error { _, err := l.Inc(ctx, key, 1); return err },
		"Layered.Refund":   func() error { _, err := l.Refund(ctx, key, 1); return err },
		"Layered.Get":      func() error { _, err := l.Get(ctx, key); return err },
		"Layered.State":    func() error { _, _, err := l.State(ctx, key); return err },
		"Layered.Reset":    func() error { return l.Reset(ctx, key) },
	}
	for name, call := range calls {
		err := call()
		require.Error(t, err, name)
		assert.ErrorIs(t, err, ratedb.ErrUnavailable, name)
		assert.NotContains(t, err.Error(), "alice", "%s: the error quotes the key", name)
		assert.Contains(t, err.Error(), "unknown command", name)
		var re redis.Error
		assert.True(t, errors.As(err, &re), "%s: still a redis.Error: %v", name, err)
	}
}
