package redisstore_test

import (
	"math"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MaxCount's doc: Set and Inc past it return ErrInvalidArgument (and change
// nothing); a Hit never counts past a limit, and a limit above MaxCount
// behaves as MaxCount.
func TestMaxCountBounds(t *testing.T) {
	srv := startServer(t)
	st, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second})
	require.NoError(t, err)
	w, err := st.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)

	_, err = w.Set(ctx, "s", redisstore.MaxCount+1)
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	_, err = w.Inc(ctx, "s", redisstore.MaxCount+1)
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	n, err := w.Get(ctx, "s")
	require.NoError(t, err)
	assert.Zero(t, n, "a refused Set or Inc changed the key")

	// A limit above MaxCount behaves as MaxCount.
	r, err := w.Hit(ctx, "h", math.MaxInt64, redisstore.MaxCount)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	assert.Equal(t, redisstore.MaxCount, r.Count)
	r, err = w.Hit(ctx, "h", math.MaxInt64, 1)
	require.NoError(t, err)
	assert.False(t, r.Allowed, "a hit past MaxCount is denied, whatever the limit")
	assert.Equal(t, redisstore.MaxCount, r.Count)
	assert.Equal(t, int64(math.MaxInt64), r.Limit, "the Result reports the limit given")
	_, err = w.Inc(ctx, "h", 1)
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument, "Inc past MaxCount")
	n, err = w.Get(ctx, "h")
	require.NoError(t, err)
	assert.Equal(t, redisstore.MaxCount, n)
}
