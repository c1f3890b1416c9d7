package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reset and Set are sent once, as Refund and Undo are: resent after a lost
// reply, a Reset's DEL (or a Set's SET) would erase hits another instance
// counted since the first one ran. A lost reply is ErrUnavailable, and the
// call ran exactly once.
func TestResetAndSetAreNotResent(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	p := newProxy(t, srv.Addr(), "evalsha")
	t.Cleanup(p.Close)
	c := redis.NewClient(&redis.Options{Addr: p.Addr()}) // go-redis's default MaxRetries: 3
	t.Cleanup(func() { _ = c.Close() })
	prefix := newPrefix()
	s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	require.NoError(t, err)
	w, err := s.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	direct, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: prefix, Timeout: 5 * time.Second})
	require.NoError(t, err)
	dw, err := direct.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)

	// Load the scripts through the proxy first, so that the cut calls
	// below are one EVALSHA each.
	_, err = w.Hit(ctx, "k", 10, 5)
	require.NoError(t, err)
	require.NoError(t, w.Reset(ctx, "k"))
	_, err = w.Set(ctx, "k", 2)
	require.NoError(t, err)

	p.Arm(1)
	err = w.Reset(ctx, "k")
	require.ErrorIs(t, err, ratedb.ErrUnavailable, "a lost reply, not a resend")
	n, err := dw.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(0), n, "the Reset ran once")

	_, err = dw.Hit(ctx, "k", 10, 1) // another instance counts after it
	require.NoError(t, err)
	p.Arm(1)
	_, err = w.Set(ctx, "k", 4)
	require.ErrorIs(t, err, ratedb.ErrUnavailable)
	_, err = dw.Hit(ctx, "k", 10, 1) // and after the Set ran
	require.NoError(t, err)
	n, err = dw.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(5), n, "the Set ran once: a resent Set would have overwritten the hit after it")
}
