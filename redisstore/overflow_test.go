package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
)

// An Inc that overflows after the clock stepped back changes nothing, in
// either backend: not even the capped end that a call that succeeds stores
// (a window ending more than a scale ahead ends a scale after now). So the
// window keeps its stored end, and a read once the clock has passed the
// cap that the failed call would have stored still sees it.
func TestOverflowAfterStepBackChangesNothing(t *testing.T) {
	for _, dedup := range []time.Duration{0, 10 * time.Second} {
		for _, layered := range []bool{false, true} {
			t.Run(fmt.Sprintf("dedup=%v,layered=%v", dedup, layered), func(t *testing.T) {
				srv := startServer(t)
				clk := &stepClock{now: time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC), last: time.Now()}
				db, err := ratedb.Open("", &ratedb.Options{Clock: clk.Now})
				require.NoError(t, err)
				st, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second,
					DedupWindow: dedup, Clock: redisstore.LocalClock(clk.Now)})
				require.NoError(t, err)
				ctx := context.Background()
				type inc func(n int64) error
				type get func() (int64, error)
				var incE, incR inc
				var getE, getR get
				if layered {
					le, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5})
					require.NoError(t, err)
					lr, err := st.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5})
					require.NoError(t, err)
					incE = func(n int64) error { _, err := le.Inc(ctx, "k", n); return err }
					incR = func(n int64) error { _, err := lr.Inc(ctx, "k", n); return err }
					getE = func() (int64, error) { c, err := le.Get(ctx, "k"); return c[0], err }
					getR = func() (int64, error) { c, err := lr.Get(ctx, "k"); return c[0], err }
				} else {
					we, err := db.Window(ratedb.FixedWindow, time.Minute)
					require.NoError(t, err)
					wr, err := st.Window(ratedb.FixedWindow, time.Minute)
					require.NoError(t, err)
					incE = func(n int64) error { _, err := we.Inc(ctx, "k", n); return err }
					incR = func(n int64) error { _, err := wr.Inc(ctx, "k", n); return err }
					getE = func() (int64, error) { return we.Get(ctx, "k") }
					getR = func() (int64, error) { return wr.Get(ctx, "k") }
				}
				// Each backend's largest count; the window ends at 10:01:00.
				require.NoError(t, incE(math.MaxInt64))
				require.NoError(t, incR(redisstore.MaxCount))
				clk.step(-5 * time.Minute) // 09:55:30: the stored end is more than a scale ahead
				e1, e2 := incE(1), incR(1)
				require.ErrorIs(t, e1, ratedb.ErrInvalidArgument)
				require.ErrorIs(t, e2, ratedb.ErrInvalidArgument)
				// Had the failed Inc stored its cap, the window would have
				// ended at 09:56:30; at 09:56:40 it is still there.
				clk.step(70 * time.Second)
				n1, err1 := getE()
				n2, err2 := getR()
				require.NoError(t, err1)
				require.NoError(t, err2)
				require.EqualValues(t, int64(math.MaxInt64), n1, "embedded: the failed Inc changed the window")
				require.EqualValues(t, redisstore.MaxCount, n2, "redis (dedup %v, layered %v): the failed Inc changed the window", dedup, layered)
				require.NoError(t, db.Close())
			})
		}
	}
}

// A Layered Inc that overflows names the tier as the embedded DB does: of
// two tiers given out of storage order that both overflow, the first as
// given; of a one-tier Layered, tier 0 ("tier 0's count", not a Window's
// wording).
func TestLayeredOverflowNamesTheTierAsTheEmbeddedDB(t *testing.T) {
	srv := startServer(t)
	for name, tiers := range map[string][]ratedb.Tier{
		"two tiers, both full": {{Scale: time.Hour, Limit: 1}, {Scale: time.Minute, Limit: 1}},
		"one tier":             {{Scale: time.Hour, Limit: 1}},
	} {
		clk := &stepClock{now: time.UnixMilli(1_767_225_600_000), last: time.Now()}
		db, err := ratedb.Open("", &ratedb.Options{Clock: clk.Now})
		require.NoError(t, err)
		st, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second, Clock: redisstore.LocalClock(clk.Now)})
		require.NoError(t, err)
		ctx := context.Background()
		le, err := db.Layered(ratedb.FixedWindow, tiers...)
		require.NoError(t, err)
		lr, err := st.Layered(ratedb.FixedWindow, tiers...)
		require.NoError(t, err)
		_, err = le.Inc(ctx, "k", math.MaxInt64)
		require.NoError(t, err)
		_, err = lr.Inc(ctx, "k", redisstore.MaxCount)
		require.NoError(t, err)
		_, e1 := le.Inc(ctx, "k", 1) // every tier is full
		_, e2 := lr.Inc(ctx, "k", 1)
		require.ErrorIs(t, e1, ratedb.ErrInvalidArgument, name)
		require.ErrorIs(t, e2, ratedb.ErrInvalidArgument, name)
		require.Equal(t, e1.Error(), e2.Error(), name)
		require.NoError(t, db.Close())
	}
}
