package core_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/ratedb/ratedb/redisstore"
)

// A set's look at a key is one read of the store: another instance that
// opens the key's next window while this one looks cannot make it report
// the count of one window with the end of another. Instance A's Redis clock
// runs the other instance's hit at A's second Redis call of the decision,
// which is where a look split in two reads (count, then end) was cut: A
// then reported the full previous window's count as the new window's, and
// a reset a whole window away, though the new window held 1 of 3.
func TestRedisPeekReadsOneWindow(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	var ms atomic.Int64
	ms.Store(time.Now().Truncate(time.Minute).Add(10 * time.Second).UnixMilli())
	fake := func() time.Time { return time.UnixMilli(ms.Load()) }
	var calls atomic.Int64
	var onSecond atomic.Pointer[func()]
	clockA := func() time.Time {
		if calls.Add(1) == 2 {
			if f := onSecond.Swap(nil); f != nil {
				(*f)()
			}
		}
		return fake()
	}
	mk := func(clock func() time.Time) *core.Core {
		cl := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = cl.Close() })
		s, err := redisstore.New(cl, &redisstore.Options{Timeout: 5 * time.Second, Clock: redisstore.LocalClock(clock)})
		require.NoError(t, err)
		return core.New(redisstate.Store{S: s}, core.Options{Clock: fake})
	}
	a, b := mk(clockA), mk(fake)
	l := window("w", 3, time.Minute)
	ctx := context.Background()

	d, err := b.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 3})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	end1 := d.Results[0].ResetAt

	var end2 time.Time
	next := func() {
		// The window of "k" ends; instance B opens the next one with 1.
		ms.Store(end1.Add(time.Second).UnixMilli())
		d, err := b.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.EqualValues(t, 1, d.Results[0].Count)
		end2 = d.Results[0].ResetAt
	}
	calls.Store(0)
	onSecond.Store(&next)
	d, err = a.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1}, core.Check{Limit: l, Key: "j", Cost: 1})
	require.NoError(t, err)
	r := d.Results[0]
	t.Logf("allowed %v, k: count %d, reset %v (first window ends %v, second %v)", d.Allowed, r.Count, r.ResetAt, end1, end2)
	switch {
	case r.ResetAt.Equal(end1):
		assert.EqualValues(t, 3, r.Count, "the first window held 3")
		assert.False(t, d.Allowed)
	case !end2.IsZero() && r.ResetAt.Equal(end2):
		assert.EqualValues(t, 2, r.Count, "the second window held 1, and the set counted 1 more")
		assert.True(t, d.Allowed)
	default:
		t.Errorf("k reported count %d in a window ending %v: neither the first (%v) nor the second (%v)", r.Count, r.ResetAt, end1, end2)
	}
}

// A look at a key takes the window Redis returned (open by Redis's TIME,
// which its hits go by) as it is: an instance whose clock runs a window
// ahead of Redis's must not read a full window as ended. It did, so a
// hits_addend 0 probe of a full key answered OK with 0 counted.
func TestRedisPeekOfAnInstanceAheadOfRedis(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	cl := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cl.Close() })
	s, err := redisstore.New(cl, &redisstore.Options{Timeout: 5 * time.Second}) // ServerClock
	require.NoError(t, err)
	ahead := core.New(redisstate.Store{S: s}, core.Options{Clock: func() time.Time { return time.Now().Add(10 * time.Second) }})
	l := window("w", 3, 10*time.Second)
	ctx := context.Background()
	d, err := ahead.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 3})
	require.NoError(t, err)
	require.True(t, d.Allowed)

	d, err = ahead.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 0})
	require.NoError(t, err)
	r := d.Results[0]
	assert.False(t, r.Allowed, "the key's window is full in Redis")
	assert.EqualValues(t, 3, r.Count)
	d, err = ahead.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed, "a hit agrees with the probe")
}
