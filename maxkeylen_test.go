package ratedb_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MaxKeyLen's doc: it is the largest key a limiter accepts. A key of
// exactly MaxKeyLen bytes is counted, survives a snapshot and a restart,
// and one byte more is refused with ErrInvalidArgument.
func TestMaxKeyLenIsAccepted(t *testing.T) {
	path := tempPath(t)
	c := newClock()
	key := strings.Repeat("k", ratedb.MaxKeyLen)
	db, err := ratedb.Open(path, testOptions(c))
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	l, err := db.Layered(ratedb.StaggeredWindow, ratedb.Tier{Scale: time.Hour, Limit: 9}, ratedb.Tier{Scale: time.Minute, Limit: 9})
	require.NoError(t, err)
	r, err := w.Hit(ctx, key, 5, 2)
	require.NoError(t, err)
	assert.True(t, r.Allowed)
	lr, err := l.Hit(ctx, key, 3)
	require.NoError(t, err)
	assert.True(t, lr.Allowed)
	_, err = w.Hit(ctx, key+"k", 5, 1)
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	_, err = l.Hit(ctx, key+"k", 1)
	require.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	require.NoError(t, db.Close())

	db = openDB(t, path, testOptions(c))
	require.NoError(t, db.Verify())
	w, err = db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	l, err = db.Layered(ratedb.StaggeredWindow, ratedb.Tier{Scale: time.Hour, Limit: 9}, ratedb.Tier{Scale: time.Minute, Limit: 9})
	require.NoError(t, err)
	n, err := w.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	counts, err := l.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 3}, counts)
}
