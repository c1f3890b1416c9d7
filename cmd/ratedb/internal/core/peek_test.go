package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

// skewWindow is a store whose clock lags the core's: it still reports a
// window (count 1) ending at end.
type skewWindow struct {
	core.WindowLimiter
	end time.Time
}

func (w skewWindow) Get(context.Context, string) (int64, error)           { return 1, nil }
func (w skewWindow) ExpiresAt(context.Context, string) (time.Time, error) { return w.end, nil }

type skewStore struct{ w skewWindow }

func (s skewStore) Window(ratedb.Algorithm, time.Duration) (core.WindowLimiter, error) {
	return s.w, nil
}
func (s skewStore) Layered(ratedb.Algorithm, ...ratedb.Tier) (core.LayeredLimiter, error) {
	return nil, ratedb.ErrInvalidArgument
}

// A peek takes the window the store returned as it is: the store's clock,
// by which its hits count, may lag the core's, and at the core's reading of
// the window's end the store still counts in it. (Judged by the core's
// clock, the window had ended: the peek reported 0 of 1 and fits, while a
// hit would be denied.)
func TestPeekTrustsTheStoresWindow(t *testing.T) {
	end := t0.Add(time.Minute)
	c := core.New(skewStore{skewWindow{end: end}}, core.Options{Clock: func() time.Time { return end }})
	l := window("r", 1, time.Minute)
	d, err := c.Decide(context.Background(), core.Check{Limit: l, Key: "k", Cost: 0})
	require.NoError(t, err)
	r := d.Results[0]
	assert.False(t, r.Allowed, "the store's window holds 1 of 1")
	assert.EqualValues(t, 1, r.Count)
	assert.True(t, end.Equal(r.ResetAt), "the store's window's end, got %v", r.ResetAt)
	assert.Zero(t, r.RetryAfter, "over by the core's clock")
}

// A layered peek binds, of tiers with equal room, the one that frees up
// last, as ratedb.Layered.Hit does, whichever order the tiers are given in.
func TestLayeredPeekBindingTie(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	for _, tiers := range [][]ratedb.Tier{
		{{Scale: time.Minute, Limit: 10}, {Scale: time.Hour, Limit: 10}},
		{{Scale: time.Hour, Limit: 10}, {Scale: time.Minute, Limit: 10}},
	} {
		l := &core.Limit{Name: "l", Algorithm: ratedb.FixedWindow, Layered: true, Tiers: tiers}
		d, err := c.Decide(context.Background(), core.Check{Limit: l, Key: "k", Cost: 0})
		require.NoError(t, err)
		r := d.Results[0]
		assert.Equal(t, time.Hour, r.Scale)
		assert.Equal(t, time.Hour, tiers[r.Tier].Scale)
	}
}
