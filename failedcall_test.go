package ratedb_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/require"
)

// README: "A call that returns an error changes nothing." An Inc refused for
// overflow, made while the clock reads behind a window's end, must not store
// the clock model's cap on that window.
func TestFailedIncStoresNoCap(t *testing.T) {
	clock := newClock()
	db := openDB(t, "", testOptions(clock))
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = w.Hit(ctx, "k", 10, 1) // window [epoch, epoch+1m), count 1
	require.NoError(t, err)

	clock.Set(epoch.Add(-30 * time.Second)) // the clock steps back half a minute
	_, err = w.Inc(ctx, "k", math.MaxInt64)
	require.True(t, errors.Is(err, ratedb.ErrInvalidArgument), "err %v", err)

	clock.Set(epoch.Add(40 * time.Second)) // corrected: inside the window again
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the failed Inc changed the window")
}
