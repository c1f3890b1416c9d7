package core_test

// Tests added after mutation testing (TestGap...): each fails with one
// deliberate bug that the rest of the suite let through.

import (
	"context"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Checks of one set on the same key but different counters (other scales)
// do not add up: each fits its own window.
func TestGapSetSameKeyOtherCountersDoNotAddUp(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	minute, hour := window("m", 1, time.Minute), window("h", 1, time.Hour)
	d, err := c.Decide(context.Background(),
		core.Check{Limit: minute, Key: "k", Cost: 1}, core.Check{Limit: hour, Key: "k", Cost: 1})
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.True(t, d.Results[0].Counted)
	assert.True(t, d.Results[1].Counted)
}

// A refund earlier in a set is not pending cost for a later hit on the same
// counter.
func TestGapSetRefundIsNotPendingCost(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	l := window("r", 3, time.Minute)
	ctx := context.Background()
	_, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
	require.NoError(t, err)
	d, err := c.Decide(ctx,
		core.Check{Limit: l, Key: "k", Cost: 2, Refund: true}, core.Check{Limit: l, Key: "k", Cost: 2})
	require.NoError(t, err)
	assert.True(t, d.Allowed, "count 1 + hit 2 fits 3")
	assert.True(t, d.Results[1].Counted)
}

// A refund of cost 0 in a set gives nothing back and is no error.
func TestGapSetZeroCostRefund(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	l := window("r", 3, time.Minute)
	ctx := context.Background()
	_, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
	require.NoError(t, err)
	d, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 0, Refund: true})
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.EqualValues(t, 1, d.Results[0].Count)
}

// A refund of a key with no window reports the state before it: the window
// a hit would open.
func TestGapRefundWithoutWindowReportsPeek(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	l := window("r", 5, time.Minute)
	d, err := c.Decide(context.Background(), core.Check{Limit: l, Key: "fresh", Cost: 2, Refund: true})
	require.NoError(t, err)
	r := d.Results[0]
	assert.True(t, r.Allowed)
	assert.EqualValues(t, 0, r.Count)
	assert.EqualValues(t, 5, r.Remaining)
	assert.True(t, t0.Add(time.Minute).Equal(r.ResetAt), "reset at the next window's end, got %v", r.ResetAt)
}

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
func TestGapPeekTrustsTheStoresWindow(t *testing.T) {
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
func TestGapLayeredPeekBindingTie(t *testing.T) {
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

// Boundary spikes at the edges of their definition: a window exhausted
// exactly 10% of its scale after it began is not a spike; a per-key window
// that began exactly 10% of the scale after the exhausted one ended is.
func TestGapBoundarySpikeEdges(t *testing.T) {
	t.Run("exhausted at 10% is late", func(t *testing.T) {
		obs := &counts{}
		c, _, now := newCore(t, core.Options{Observer: obs})
		l := window("r", 2, 10*time.Second)
		hit := func() {
			_, err := c.Decide(context.Background(), core.Check{Limit: l, Key: "k", Cost: 1})
			require.NoError(t, err)
		}
		hit()
		hit() // window [0s, 10s) exhausted
		now.Add(10_000)
		hit() // window [10s, 20s)
		now.Add(1_000)
		hit() // exhausted at 11 s: 10% after its start, not within it
		assert.Equal(t, 0, obs.spikes)
	})
	t.Run("per-key window 10% after the last", func(t *testing.T) {
		obs := &counts{}
		c, _, now := newCore(t, core.Options{Observer: obs})
		l := &core.Limit{Name: "p", Algorithm: ratedb.PerKeyWindow, Tiers: []ratedb.Tier{{Scale: 10 * time.Second, Limit: 1}}}
		hit := func() {
			_, err := c.Decide(context.Background(), core.Check{Limit: l, Key: "k", Cost: 1})
			require.NoError(t, err)
		}
		hit()           // window [0s, 10s) exhausted
		now.Add(11_000) // 1 s (10%) after it ended
		hit()           // window [11s, 21s) exhausted at once
		assert.Equal(t, 1, obs.spikes)
	})
}

// A refund on a counter whose count is over this limit's (another limit
// with the same algorithm and window shares the key's counter, or the limit
// was lowered, which keeps the counts) reports Remaining 0, never negative:
// Remaining is max(0, Limit-Count).
func TestGapRefundRemainingNeverNegative(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	wide, narrow := window("wide", 10, time.Minute), window("narrow", 2, time.Minute)
	ctx := context.Background()
	_, err := c.Decide(ctx, core.Check{Limit: wide, Key: "k", Cost: 10})
	require.NoError(t, err)
	d, err := c.Decide(ctx, core.Check{Limit: narrow, Key: "k", Cost: 1, Refund: true})
	require.NoError(t, err)
	r := d.Results[0]
	assert.EqualValues(t, 9, r.Count)
	assert.EqualValues(t, 2, r.Limit)
	assert.EqualValues(t, 0, r.Remaining)
}

// A shadow peek after a hit of the same set on the same counter, under a
// smaller limit than the hit's, reports the state after the hit with
// Remaining 0, never negative.
func TestGapPeekAfterHitRemainingNeverNegative(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	wide, narrow := window("wide", 10, time.Minute), window("narrow", 2, time.Minute)
	narrow.Shadow = true // over its limit, it does not deny the set
	d, err := c.Decide(context.Background(),
		core.Check{Limit: wide, Key: "k", Cost: 5}, core.Check{Limit: narrow, Key: "k", Cost: 0})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.True(t, d.Results[0].Counted)
	r := d.Results[1]
	assert.False(t, r.Allowed, "5 counted, the peek's limit is 2")
	assert.EqualValues(t, 5, r.Count)
	assert.EqualValues(t, 0, r.Remaining)
}

// A refund in a set that another check denied is reported allowed, with the
// state before it and no RetryAfter (RetryAfter is 0 when allowed), even
// when its key is full.
func TestGapDeniedSetRefundHasNoRetryAfter(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	l := window("r", 1, time.Minute)
	ctx := context.Background()
	_, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
	require.NoError(t, err)
	d, err := c.Decide(ctx,
		core.Check{Limit: l, Key: "k", Cost: 1, Refund: true}, core.Check{Limit: l, Key: "k", Cost: 1})
	require.NoError(t, err)
	require.False(t, d.Allowed, "the hit does not fit: refunds are applied after the hits")
	r := d.Results[0]
	assert.True(t, r.Allowed)
	assert.False(t, r.Counted)
	assert.EqualValues(t, 1, r.Count, "not applied")
	assert.Zero(t, r.RetryAfter)
}
