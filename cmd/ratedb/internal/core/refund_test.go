package core_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

func TestRefund(t *testing.T) {
	c, db, _ := newCore(t, core.Options{})
	ctx := context.Background()
	l := window("r", 5, time.Minute)
	hit := func(cost int64) core.Decision {
		d, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: cost})
		require.NoError(t, err)
		return d
	}
	refund := func(cost int64, others ...core.Check) core.Decision {
		d, err := c.Decide(ctx, append([]core.Check{{Limit: l, Key: "k", Cost: cost, Refund: true}}, others...)...)
		require.NoError(t, err)
		return d
	}
	require.True(t, hit(5).Allowed)
	require.False(t, hit(1).Allowed)

	d := refund(2)
	require.True(t, d.Allowed)
	assert.EqualValues(t, 3, d.Results[0].Count)
	assert.EqualValues(t, 2, d.Results[0].Remaining)
	assert.False(t, d.Results[0].Counted)
	assert.True(t, hit(2).Allowed, "the refunded hits can be used again")
	assert.False(t, hit(1).Allowed)

	// A refund in a denied set is not applied.
	full := window("full", 0, time.Minute)
	d = refund(3, core.Check{Limit: full, Key: "other", Cost: 1})
	assert.False(t, d.Allowed)
	assert.True(t, d.Results[0].Allowed, "a refund never denies")
	assert.False(t, hit(1).Allowed, "nothing was given back")

	// Never below zero, and a key without a window gets none.
	d = refund(100)
	assert.EqualValues(t, 0, d.Results[0].Count)
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	require.NoError(t, w.Reset(ctx, "k"))
	refund(1)
	end, err := w.ExpiresAt(ctx, "k")
	require.NoError(t, err)
	assert.True(t, end.IsZero(), "no window opened by a refund")

	// Refunds need a single window.
	layered := &core.Limit{Name: "l", Algorithm: ratedb.FixedWindow, Layered: true,
		Tiers: []ratedb.Tier{{Scale: time.Minute, Limit: 1}, {Scale: time.Hour, Limit: 2}}}
	_, err = c.Decide(ctx, core.Check{Limit: layered, Key: "k", Cost: 1, Refund: true})
	assert.ErrorIs(t, err, core.ErrInvalidCheck)
}

// rollStore's windows move the clock past the window's end right after
// their second Get (the set's peek is the first, the refund's read the
// second), so the refund's Set lands in the next window.
type rollStore struct {
	core.DBStore
	now *atomic.Int64
}

type rollWindow struct {
	*ratedb.Window
	now  *atomic.Int64
	gets *atomic.Int32 // Gets left before the clock jumps; armed when > 0
}

func (s rollStore) Window(alg ratedb.Algorithm, scale time.Duration) (core.WindowLimiter, error) {
	w, err := s.DB.Window(alg, scale)
	if err != nil {
		return nil, err
	}
	return &rollWindow{Window: w, now: s.now, gets: &atomic.Int32{}}, nil
}

func (w *rollWindow) Get(ctx context.Context, key string) (int64, error) {
	n, err := w.Window.Get(ctx, key)
	if w.gets.Add(-1) == 0 {
		w.now.Add(time.Minute.Milliseconds())
	}
	return n, err
}

func TestRefundAcrossWindowBoundary(t *testing.T) {
	c, db, now := newCore(t, core.Options{})
	ctx := context.Background()
	d, err := c.Decide(ctx, core.Check{Limit: window("r", 5, time.Minute), Key: "k", Cost: 4})
	require.NoError(t, err)
	require.True(t, d.Allowed)

	// A second core on the same DB whose limiters jump a minute ahead right
	// after the refund reads the count.
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	rolling := core.New(rollStoreArmed{rollStore{DBStore: core.DBStore{DB: db}, now: now}}, core.Options{Clock: clock})
	d, err = rolling.Decide(ctx, core.Check{Limit: window("r", 5, time.Minute), Key: "k", Cost: 1, Refund: true})
	require.NoError(t, err)
	assert.EqualValues(t, 0, d.Results[0].Count)

	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.EqualValues(t, 0, n, "the next window holds no phantom count")
}

// rollStoreArmed returns windows whose roll is armed from the start.
type rollStoreArmed struct{ rollStore }

func (s rollStoreArmed) Window(alg ratedb.Algorithm, scale time.Duration) (core.WindowLimiter, error) {
	w, err := s.rollStore.Window(alg, scale)
	if err != nil {
		return nil, err
	}
	w.(*rollWindow).gets.Store(2)
	return w, nil
}
