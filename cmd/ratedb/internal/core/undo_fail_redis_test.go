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

// A set that another instance denied while it was counting stays denied when
// Redis fails before the set's counted hits are undone: the limit's verdict
// is known, and answering the undo's error instead let --fail-open (or
// Envoy's failure_mode_deny: false, on UNAVAILABLE) admit a request a limit
// had denied. Instance A's Redis clock runs the other instance's hit just
// before A's hit of "b" (A's fourth Redis call: a look at "a" and "b", a
// hit of "a", a hit of "b") and stops Redis just before A's undo of "a".
func TestRedisSetDeniedStaysDeniedWhenUndoFails(t *testing.T) {
	addr, kill := proctest.StartRedis(t)
	var ms atomic.Int64
	ms.Store(time.Now().Truncate(time.Minute).Add(10 * time.Second).UnixMilli())
	fake := func() time.Time { return time.UnixMilli(ms.Load()) }
	var calls atomic.Int64
	hooks := map[int64]func(){}
	clockA := func() time.Time {
		if f := hooks[calls.Add(1)]; f != nil {
			f()
		}
		return fake()
	}
	mk := func(clock func() time.Time, opts core.Options) *core.Core {
		cl := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = cl.Close() })
		s, err := redisstore.New(cl, &redisstore.Options{Timeout: 2 * time.Second, Clock: redisstore.LocalClock(clock)})
		require.NoError(t, err)
		opts.Clock = fake
		return core.New(redisstate.Store{S: s}, opts)
	}
	a := mk(clockA, core.Options{FailOpen: true})
	b := mk(fake, core.Options{})
	la, lb := window("a", 5, time.Minute), window("b", 1, time.Minute)
	ctx := context.Background()

	var undoRan bool
	hooks[4] = func() {
		d, err := b.Decide(ctx, core.Check{Limit: lb, Key: "b", Cost: 1})
		require.NoError(t, err)
		require.True(t, d.Allowed, "the other instance takes b's last hit")
	}
	hooks[5] = func() { undoRan = true; kill() }
	d, err := a.Decide(ctx, core.Check{Limit: la, Key: "a", Cost: 1}, core.Check{Limit: lb, Key: "b", Cost: 1})
	require.NoError(t, err)
	require.True(t, undoRan, "the set reached its undo")
	assert.False(t, d.FailedOpen, "the set was decided: b is over its limit")
	assert.False(t, d.Allowed, "b is over its limit")
	if assert.Len(t, d.Results, 2) {
		assert.False(t, d.Results[1].Allowed)
		assert.True(t, d.Results[0].Counted, "a's hit could not be undone and is reported counted")
	}
}
