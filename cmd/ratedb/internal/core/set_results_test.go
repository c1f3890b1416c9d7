package core_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A shadow check over its limit counts nothing, so its cost must not be
// pending for a later enforced check of the set on the same counter.
func TestShadowOverLimitIsNotPendingCost(t *testing.T) {
	c, db, _ := newCore(t, core.Options{})
	ctx := context.Background()
	s := window("s", 2, time.Minute) // same algorithm and scale: same counter
	s.Shadow = true
	e := window("e", 10, time.Minute)
	d, err := c.Decide(ctx, core.Check{Limit: s, Key: "k", Cost: 5}, core.Check{Limit: e, Key: "k", Cost: 6})
	require.NoError(t, err)
	assert.False(t, d.Results[0].Allowed, "the shadow check is over its limit")
	assert.False(t, d.Results[0].Counted)
	assert.True(t, d.Results[1].Allowed, "6 fits 10 on an empty key: the shadow check counts nothing")
	assert.True(t, d.Allowed)
	assert.Equal(t, map[string]int64{"k": 6}, minuteCounts(t, db, "k"))
}

// A quota check over its limit counts nothing, so a later quota check on the
// same counter that fits on its own must not be denied by its cost, nor the
// set with it.
func TestQuotaOverLimitIsNotPendingCost(t *testing.T) {
	c, db, _ := newCore(t, core.Options{})
	ctx := context.Background()
	q := quotaLimit("q", 5)
	d, err := c.Decide(ctx, core.Check{Limit: q, Key: "k", Cost: 4})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = c.Decide(ctx, core.Check{Limit: q, Key: "k", Cost: 3}, core.Check{Limit: q, Key: "k", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Results[0].Allowed, "4+3 > 5")
	assert.True(t, d.Results[1].Allowed, "4+1 fits 5")
	assert.True(t, d.Allowed, "one quota check fits")
	assert.Equal(t, map[string]int64{"k": 5}, minuteCounts(t, db, "k"))
}

// A layered peek after a hit of the same key in the set: its tiers agree
// with its Count.
func TestLayeredPeekTiersAfterHit(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	l := &core.Limit{Name: "l", Algorithm: ratedb.FixedWindow, Layered: true,
		Tiers: []ratedb.Tier{{Scale: time.Minute, Limit: 10}, {Scale: time.Hour, Limit: 100}}}
	d, err := c.Decide(context.Background(), core.Check{Limit: l, Key: "k", Cost: 3}, core.Check{Limit: l, Key: "k", Cost: 0})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	hit, peek := d.Results[0], d.Results[1]
	assert.EqualValues(t, 3, peek.Count)
	assert.EqualValues(t, 7, peek.Remaining)
	require.Len(t, peek.Tiers, 2)
	for i := range hit.Tiers {
		assert.Equal(t, hit.Tiers[i].Count, peek.Tiers[i].Count, "tier %d count", i)
		assert.Equal(t, hit.Tiers[i].Remaining, peek.Tiers[i].Remaining, "tier %d remaining", i)
	}
}

// A peek after a hit of the same key reports the key's state after the
// hit, even when the hit opened a new window.
func TestPeekAfterHitAcrossWindowEnd(t *testing.T) {
	_, db, now := newCore(t, core.Options{})
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	ctx := context.Background()
	l := window("r", 10, time.Minute)
	plain := core.New(core.DBStore{DB: db}, core.Options{Clock: clock})
	d, err := plain.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 8})
	require.NoError(t, err)
	require.True(t, d.Allowed)

	// The window ends between the set's peeks and its hit.
	fs := &faultStore{DBStore: core.DBStore{DB: db}, hook: "k"}
	fs.before = func() { fs.before = nil; now.Add(time.Minute.Milliseconds()) }
	c := core.New(fs, core.Options{Clock: clock})
	d, err = c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1}, core.Check{Limit: l, Key: "k", Cost: 0})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	hit, peek := d.Results[0], d.Results[1]
	assert.EqualValues(t, 1, hit.Count, "the hit opened the next window")
	assert.Equal(t, hit.Count, peek.Count, "the peek reports the key after the hit")
	assert.Equal(t, hit.Remaining, peek.Remaining)
	assert.True(t, hit.ResetAt.Equal(peek.ResetAt), "reset %v, peek says %v", hit.ResetAt, peek.ResetAt)
}

// Layered limits with the same tiers given in another order share their
// counters in the store (ratedb and redisstore store tiers by scale): a peek
// after a hit of the same key reports the key after it, whatever the order.
func TestLayeredTierOrderSharesCounters(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	ab := &core.Limit{Name: "ab", Algorithm: ratedb.FixedWindow, Layered: true,
		Tiers: []ratedb.Tier{{Scale: time.Minute, Limit: 3}, {Scale: time.Hour, Limit: 100}}}
	ba := &core.Limit{Name: "ba", Algorithm: ratedb.FixedWindow, Layered: true,
		Tiers: []ratedb.Tier{{Scale: time.Hour, Limit: 100}, {Scale: time.Minute, Limit: 3}}}
	d, err := c.Decide(context.Background(), core.Check{Limit: ab, Key: "k", Cost: 2}, core.Check{Limit: ba, Key: "k", Cost: 0})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.True(t, d.Results[0].Counted)
	peek := d.Results[1]
	assert.EqualValues(t, 2, peek.Count, "the key holds the set's hit of 2")
	assert.EqualValues(t, 1, peek.Remaining)
	assert.Equal(t, time.Minute, peek.Scale)
}

// A check whose cost and the set's pending cost on its counter add past
// the largest int64 does not fit: the sum saturates instead of wrapping to
// a small number that a peek would report as fitting.
func TestHugeCostOnTopOfPendingDoesNotFit(t *testing.T) {
	c, db, _ := newCore(t, core.Options{})
	ctx := context.Background()
	e := window("e", 100, time.Minute)
	s := window("s", 10, time.Minute) // same algorithm and scale: same counter
	s.Shadow = true
	d, err := c.Decide(ctx, core.Check{Limit: e, Key: "k", Cost: 50}, core.Check{Limit: s, Key: "k", Cost: math.MaxInt64})
	require.NoError(t, err)
	assert.True(t, d.Results[0].Allowed)
	assert.False(t, d.Results[1].Allowed, "50 + MaxInt64 does not fit 10")
	assert.False(t, d.Results[1].Counted)
	assert.True(t, d.Allowed, "a shadow check does not deny the set")
	assert.Equal(t, map[string]int64{"k": 50}, minuteCounts(t, db, "k"))
}

// Checks of one set on the same key but different counters (other scales)
// do not add up: each fits its own window.
func TestSetSameKeyOtherCountersDoNotAddUp(t *testing.T) {
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
func TestSetRefundIsNotPendingCost(t *testing.T) {
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

// A shadow peek after a hit of the same set on the same counter, under a
// smaller limit than the hit's, reports the state after the hit with
// Remaining 0, never negative.
func TestPeekAfterHitRemainingNeverNegative(t *testing.T) {
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
