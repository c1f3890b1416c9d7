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

// Layered.Inc's doc: an increment that would take a tier's count past
// 1<<63-1 is refused with ErrInvalidArgument and changes no tier.
func TestLayeredIncOverflowChangesNoTier(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		db := openDB(t, path, testOptions(newClock()))
		l, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5}, ratedb.Tier{Scale: time.Hour, Limit: 5})
		require.NoError(t, err)
		ctx := context.Background()
		_, err = l.Inc(ctx, "k", 3)
		require.NoError(t, err)
		_, err = l.Inc(ctx, "k", math.MaxInt64-3)
		require.NoError(t, err)
		_, err = l.Inc(ctx, "k", 1)
		require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
		counts, err := l.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, []int64{math.MaxInt64, math.MaxInt64}, counts, "the refused Inc changed a tier")
	})
}
