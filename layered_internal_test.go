package ratedb

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Layered Inc that fails because one tier's count would overflow changes
// no tier: a tier checked before the overflowing one keeps its count.
func TestLayeredIncOverflowKeepsTheTiersCheckedBeforeIt(t *testing.T) {
	t0 := time.UnixMilli(1_767_225_600_000)
	clk := &settableClock{t: t0}
	db, err := Open(filepath.Join(t.TempDir(), "rate.db"), &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	ctx := context.Background()
	l, err := db.Layered(FixedWindow, Tier{Scale: time.Minute, Limit: 1}, Tier{Scale: time.Hour, Limit: 1})
	require.NoError(t, err)
	_, err = l.Inc(ctx, "k", maxCount-5)
	require.NoError(t, err)
	clk.Set(t0.Add(time.Minute)) // the minute tier's window has ended, the hour's has not
	_, err = l.Inc(ctx, "k", 10)
	require.ErrorIs(t, err, ErrInvalidArgument)
	got, err := l.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []int64{0, maxCount - 5}, got)
}
