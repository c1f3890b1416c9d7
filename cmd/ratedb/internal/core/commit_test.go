package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultStore's windows wrap the DB's: before and after are called right
// before and after the real Hit of key hook (moving the clock, cancelling
// the caller's context, say), and key
// failing fails every Hit and Refund of that key without touching the DB,
// as a network store whose call timed out before it reached the server.
type faultStore struct {
	core.DBStore
	hook    string
	before  func()
	after   func()
	failing string
}

type faultWindow struct {
	*ratedb.Window
	s *faultStore
}

func (s *faultStore) Window(alg ratedb.Algorithm, scale time.Duration) (core.WindowLimiter, error) {
	w, err := s.DB.Window(alg, scale)
	if err != nil {
		return nil, err
	}
	return &faultWindow{Window: w, s: s}, nil
}

var errStoreDown = fmt.Errorf("test: the store timed out (%w)", ratedb.ErrUnavailable)

func (w *faultWindow) Hit(ctx context.Context, key string, limit, increment int64) (ratedb.Result, error) {
	if key == w.s.failing {
		return ratedb.Result{}, errStoreDown
	}
	if key == w.s.hook && w.s.before != nil {
		w.s.before()
	}
	r, err := w.Window.Hit(ctx, key, limit, increment)
	if key == w.s.hook && w.s.after != nil {
		w.s.after()
	}
	return r, err
}

func (w *faultWindow) Refund(ctx context.Context, key string, amount int64) (int64, time.Time, error) {
	if key == w.s.failing {
		return 0, time.Time{}, errStoreDown
	}
	return w.Window.Refund(ctx, key, amount)
}

// minuteCounts returns the counts of keys in db's one-minute fixed windows.
func minuteCounts(t *testing.T, db *ratedb.DB, keys ...string) map[string]int64 {
	t.Helper()
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	out := map[string]int64{}
	for _, k := range keys {
		n, err := w.Get(context.Background(), k)
		require.NoError(t, err)
		out[k] = n
	}
	return out
}

// A caller that gives up while a decided set is being counted (Envoy's
// rate-limit timeout expiring between two hits) does not leave the set
// partly counted: the set is counted whole and answered.
func TestSetCancelledWhileCountingIsCountedWhole(t *testing.T) {
	_, db, now := newCore(t, core.Options{})
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := core.New(&faultStore{DBStore: core.DBStore{DB: db}, hook: "a", after: cancel}, core.Options{Clock: clock})
	l := window("r", 10, time.Minute)
	d, err := c.Decide(ctx, core.Check{Limit: l, Key: "a", Cost: 1}, core.Check{Limit: l, Key: "b", Cost: 2})
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.True(t, d.Results[0].Counted && d.Results[1].Counted)
	assert.Equal(t, map[string]int64{"a": 1, "b": 2}, minuteCounts(t, db, "a", "b"))

	// Cancelled before anything is counted: an error, nothing counted.
	_, err = c.Decide(ctx, core.Check{Limit: l, Key: "a", Cost: 1}, core.Check{Limit: l, Key: "b", Cost: 2})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, map[string]int64{"a": 1, "b": 2}, minuteCounts(t, db, "a", "b"))
}

// A store call that fails while a decided set is counted takes the set's
// counted hits back: a set that answers an error counts nothing.
func TestSetStoreFailureWhileCountingCountsNothing(t *testing.T) {
	_, db, now := newCore(t, core.Options{})
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	fs := &faultStore{DBStore: core.DBStore{DB: db}}
	c := core.New(fs, core.Options{Clock: clock})
	ctx := context.Background()
	l := window("r", 10, time.Minute)
	tiers := []ratedb.Tier{{Scale: time.Minute, Limit: 5}, {Scale: time.Hour, Limit: 50}}
	ll := &core.Limit{Name: "t", Algorithm: ratedb.FixedWindow, Tiers: tiers, Layered: true}
	d, err := c.Decide(ctx, core.Check{Limit: l, Key: "refunded", Cost: 4})
	require.NoError(t, err)
	require.True(t, d.Allowed)

	// The peeks pass (fs fails only hits and refunds); the hit of b fails
	// after a and the layered a were counted.
	fs.failing = "b"
	_, err = c.Decide(ctx,
		core.Check{Limit: l, Key: "a", Cost: 2},
		core.Check{Limit: ll, Key: "a", Cost: 3},
		core.Check{Limit: l, Key: "refunded", Cost: 1, Refund: true},
		core.Check{Limit: l, Key: "b", Cost: 1},
		core.Check{Limit: l, Key: "c", Cost: 1},
	)
	require.ErrorIs(t, err, ratedb.ErrUnavailable)
	assert.Equal(t, map[string]int64{"a": 0, "b": 0, "c": 0, "refunded": 4}, minuteCounts(t, db, "a", "b", "c", "refunded"))
	lt, err := db.Layered(ratedb.FixedWindow, tiers...)
	require.NoError(t, err)
	got, err := lt.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, got, "the layered hit was taken back")

	// A failed refund takes the hits back too.
	fs.failing = "refunded"
	_, err = c.Decide(ctx,
		core.Check{Limit: l, Key: "a", Cost: 2},
		core.Check{Limit: l, Key: "refunded", Cost: 1, Refund: true},
		core.Check{Limit: l, Key: "c", Cost: 1},
	)
	require.ErrorIs(t, err, ratedb.ErrUnavailable)
	assert.Equal(t, map[string]int64{"a": 0, "c": 0, "refunded": 4}, minuteCounts(t, db, "a", "c", "refunded"))

	// With the store back, the same set counts.
	fs.failing = ""
	d, err = c.Decide(ctx,
		core.Check{Limit: l, Key: "a", Cost: 2},
		core.Check{Limit: l, Key: "refunded", Cost: 1, Refund: true},
		core.Check{Limit: l, Key: "c", Cost: 1},
	)
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.Equal(t, map[string]int64{"a": 2, "c": 1, "refunded": 3}, minuteCounts(t, db, "a", "c", "refunded"))
}

// A decided set's hits run without the caller's context (so that a caller
// giving up cannot leave it half counted): a hit that fails then is a store
// failure even if the caller gave up meanwhile. It is reported to the
// Observer and, with FailOpen, failed open; it was taken for the caller's
// cancellation (CallerGaveUp), so a Redis that failed a set's hits (and
// maybe left them counted, if their undo failed too) went unreported
// whenever Envoy's 20 ms timeout or an HTTP client's hang-up came first.
func TestSetStoreFailureAfterTheCallerGaveUpIsAStoreFailure(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("failOpen=%v", failOpen), func(t *testing.T) {
			_, db, now := newCore(t, core.Options{})
			clock := func() time.Time { return time.UnixMilli(now.Load()) }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The caller gives up while a's hit runs; b's hit then fails on
			// its own (the store timed out).
			fs := &faultStore{DBStore: core.DBStore{DB: db}, hook: "a", after: cancel, failing: "b"}
			obs := &counts{}
			c := core.New(fs, core.Options{Clock: clock, Observer: obs, FailOpen: failOpen})
			l := window("r", 10, time.Minute)
			d, err := c.Decide(ctx, core.Check{Limit: l, Key: "a", Cost: 1}, core.Check{Limit: l, Key: "b", Cost: 1})
			require.ErrorIs(t, ctx.Err(), context.Canceled, "the caller gave up during the set")
			if failOpen {
				require.NoError(t, err)
				assert.True(t, d.FailedOpen, "a store failure is failed open")
				require.ErrorIs(t, d.StoreErr, errStoreDown)
			} else {
				require.ErrorIs(t, err, errStoreDown)
				assert.NotErrorIs(t, err, context.Canceled)
			}
			assert.Equal(t, 1, obs.storeErr, "the store failure is reported")
			assert.Equal(t, map[string]int64{"a": 0, "b": 0}, minuteCounts(t, db, "a", "b"), "the set counts nothing")
		})
	}
}
