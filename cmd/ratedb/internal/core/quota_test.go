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

func quotaLimit(name string, limit int64) *core.Limit {
	l := window(name, limit, time.Minute)
	l.Quota = true
	return l
}

// TestQuota: quota checks are soft limits of one group. One over its limit
// is reported and counts nothing; the set is denied by them only when all
// of them are over; an enforced check still denies on its own.
func TestQuota(t *testing.T) {
	c, db, _ := newCore(t, core.Options{})
	ctx := context.Background()
	q1, q2, e := quotaLimit("q1", 1), quotaLimit("q2", 2), window("e", 10, time.Minute)
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	count := func(key string) int64 {
		n, err := w.Get(ctx, key)
		require.NoError(t, err)
		return n
	}
	set := func() core.Decision {
		d, err := c.Decide(ctx, core.Check{Limit: q1, Key: "a", Cost: 1}, core.Check{Limit: q2, Key: "b", Cost: 1}, core.Check{Limit: e, Key: "c", Cost: 1})
		require.NoError(t, err)
		return d
	}

	d := set()
	require.True(t, d.Allowed)
	assert.True(t, d.Results[0].Counted)
	assert.True(t, d.Results[1].Counted)

	d = set() // a is over its quota, b still fits
	require.True(t, d.Allowed, "one quota check fits")
	assert.False(t, d.Results[0].Allowed, "a's verdict is reported")
	assert.False(t, d.Results[0].Counted, "a quota check over its limit counts nothing")
	assert.True(t, d.Results[1].Counted)
	assert.True(t, d.Results[2].Counted)

	d = set() // both over
	assert.False(t, d.Allowed, "every quota check is over its limit")
	for i, r := range d.Results {
		assert.False(t, r.Counted, "check %d", i)
	}
	assert.True(t, d.Results[2].Allowed, "the enforced check fit")
	assert.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 2}, map[string]int64{"a": count("a"), "b": count("b"), "c": count("c")})

	// A single quota check denies when it is over, as any check does.
	d, err = c.Decide(ctx, core.Check{Limit: q1, Key: "a", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed)

	// An enforced check over its limit denies whatever the quota checks.
	full := window("full", 0, time.Minute)
	d, err = c.Decide(ctx, core.Check{Limit: q1, Key: "z", Cost: 1}, core.Check{Limit: full, Key: "c", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Zero(t, count("z"), "nothing counted")

	// A shadow quota check always fits the group; a refund is not in it.
	sq := quotaLimit("sq", 0)
	sq.Shadow = true
	d, err = c.Decide(ctx, core.Check{Limit: q1, Key: "a", Cost: 1}, core.Check{Limit: sq, Key: "s", Cost: 1})
	require.NoError(t, err)
	assert.True(t, d.Allowed, "the shadow quota check")
	d, err = c.Decide(ctx, core.Check{Limit: q1, Key: "a", Cost: 1}, core.Check{Limit: q2, Key: "b", Cost: 1, Refund: true})
	require.NoError(t, err)
	assert.False(t, d.Allowed, "a refund does not satisfy the quota group")
	assert.Equal(t, int64(2), count("b"), "and is not applied")
}

// TestQuotaLostAfterPeek: a quota check that fit at the peek but loses a
// race with another process when hit is not counted; the set stays allowed
// while another quota check fits, and is denied, counting nothing, when
// none does.
func TestQuotaLostAfterPeek(t *testing.T) {
	_, db, now := newCore(t, core.Options{})
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	c := core.New(racedStore{DBStore: core.DBStore{DB: db}, raced: "b"}, core.Options{Clock: clock})
	ctx := context.Background()
	q, e := quotaLimit("q", 5), window("e", 5, time.Minute)
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)

	d, err := c.Decide(ctx, core.Check{Limit: q, Key: "a", Cost: 1}, core.Check{Limit: q, Key: "b", Cost: 1})
	require.NoError(t, err)
	assert.True(t, d.Allowed, "a still fits")
	assert.True(t, d.Results[0].Counted)
	assert.False(t, d.Results[1].Counted)

	d, err = c.Decide(ctx, core.Check{Limit: e, Key: "c", Cost: 1}, core.Check{Limit: q, Key: "b", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed, "b was the only quota check and lost the race")
	for key, want := range map[string]int64{"a": 1, "b": 5, "c": 0} {
		n, err := w.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, want, n, "key %s", key)
	}
}
