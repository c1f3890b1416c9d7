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

var ctx = context.Background()

func TestNewOptions(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = c.Close() })

	s, err := redisstore.New(c, nil)
	require.NoError(t, err)
	require.NotNil(t, s)

	_, err = redisstore.New(nil, nil)
	assert.ErrorIs(t, err, ratedb.ErrInvalidArgument)

	_, err = redisstore.New(c, &redisstore.Options{
		Prefix:      "app:{x}:",
		Timeout:     -time.Second,
		Clock:       redisstore.LocalClock(nil),
		DedupWindow: 1500 * time.Microsecond,
	})
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	for _, field := range []string{"Prefix", "Timeout", "Clock", "DedupWindow"} {
		assert.Contains(t, err.Error(), field, "every invalid field is reported at once")
	}
	_, err = redisstore.New(c, &redisstore.Options{Timeout: 2 * time.Second, DedupWindow: time.Second})
	assert.ErrorIs(t, err, ratedb.ErrInvalidArgument, "a DedupWindow shorter than Timeout cannot cover a call's retries")
	_, err = redisstore.New(c, &redisstore.Options{Timeout: 2 * time.Second})
	assert.NoError(t, err, "the default DedupWindow grows with Timeout")
	_, err = redisstore.New(c, &redisstore.Options{DedupWindow: -1})
	assert.NoError(t, err, "negative disables deduplication")
}

// TestServerClock checks that with the default clock, windows follow Redis's
// TIME: a FixedWindow ends on a boundary of the scale just after now, a
// PerKeyWindow one scale after now, and a Store whose local clock is an hour
// off still agrees (it does not read its local clock).
func TestServerClock(t *testing.T) {
	srv := startServer(t)
	s, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	const scale = time.Hour
	before := time.Now()
	fixed, err := s.Window(ratedb.FixedWindow, scale)
	require.NoError(t, err)
	r, err := fixed.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	after := time.Now()
	assert.Zero(t, r.ResetAt.UnixMilli()%scale.Milliseconds(), "aligned on the scale")
	assert.True(t, r.ResetAt.After(before.Add(-time.Second)) && !r.ResetAt.After(after.Add(scale+time.Second)),
		"ResetAt %v within one scale of now (%v)", r.ResetAt, before)

	perKey, err := s.Window(ratedb.PerKeyWindow, scale)
	require.NoError(t, err)
	r, err = perKey.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(scale), r.ResetAt, 2*time.Second, "Redis and this machine share a clock here")

	// Another process on ServerClock counts in the same window: neither
	// reads its own clock, so skewed machines would agree too.
	skewed, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	w2, err := skewed.Window(ratedb.FixedWindow, scale)
	require.NoError(t, err)
	r2, err := w2.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(2), r2.Count, "both processes count in the same window")
	n, err := fixed.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)

	// With a LocalClock an hour ahead, a process sees its own windows.
	ahead, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{
		Timeout: 5 * time.Second,
		Clock:   redisstore.LocalClock(func() time.Time { return time.Now().Add(scale) }),
	})
	require.NoError(t, err)
	w3, err := ahead.Window(ratedb.FixedWindow, scale)
	require.NoError(t, err)
	r3, err := w3.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	assert.Equal(t, int64(1), r3.Count, "the stored window is over by this process's clock")
	assert.True(t, r3.ResetAt.After(r2.ResetAt))
}
