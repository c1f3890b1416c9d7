package core_test

import (
	"context"
	"sync"
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
// their first State (the set's peek), so the refund finds the window ended.
type rollStore struct {
	core.DBStore
	now *atomic.Int64
}

type rollWindow struct {
	*ratedb.Window
	now    *atomic.Int64
	rolled atomic.Bool
}

func (s rollStore) Window(alg ratedb.Algorithm, scale time.Duration) (core.WindowLimiter, error) {
	w, err := s.DB.Window(alg, scale)
	if err != nil {
		return nil, err
	}
	return &rollWindow{Window: w, now: s.now}, nil
}

func (w *rollWindow) State(ctx context.Context, key string) (int64, time.Time, error) {
	n, end, err := w.Window.State(ctx, key)
	if w.rolled.CompareAndSwap(false, true) {
		w.now.Add(time.Minute.Milliseconds())
	}
	return n, end, err
}

// A window that ends between the set's peek and its refund gets nothing
// back, and the refund opens no window in its place.
func TestRefundAcrossWindowBoundary(t *testing.T) {
	c, db, now := newCore(t, core.Options{})
	ctx := context.Background()
	d, err := c.Decide(ctx, core.Check{Limit: window("r", 5, time.Minute), Key: "k", Cost: 4})
	require.NoError(t, err)
	require.True(t, d.Allowed)

	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	rolling := core.New(rollStore{DBStore: core.DBStore{DB: db}, now: now}, core.Options{Clock: clock})
	d, err = rolling.Decide(ctx, core.Check{Limit: window("r", 5, time.Minute), Key: "k", Cost: 1, Refund: true})
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.EqualValues(t, 0, d.Results[0].Count, "the key's state once the refund found its window ended")
	assert.True(t, d.Results[0].ResetAt.After(clock()), "the end of the window a hit would open now, not the ended one")

	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.EqualValues(t, 0, n, "the next window holds no phantom count")
	end, err := w.ExpiresAt(ctx, "k")
	require.NoError(t, err)
	assert.True(t, end.IsZero(), "the refund opened no window")
}

// Two cores sharing one store stand for two processes sharing Redis: their
// stripes do not exclude each other, so only the store's one-step refund
// keeps every hit. One core hits while the other refunds hits it made
// earlier; the count left must be exact.
func TestRefundsRaceHitsFromAnotherCore(t *testing.T) {
	a, db, now := newCore(t, core.Options{})
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	b := core.New(core.DBStore{DB: db}, core.Options{Clock: clock})
	ctx := context.Background()
	l := window("r", 1_000_000, time.Hour)
	const n = 2000
	for range n { // b's hits, refunded below while a hits
		d, err := b.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	var wg sync.WaitGroup
	for _, job := range []func() error{
		func() error {
			for range n {
				if _, err := a.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1}); err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			for range n {
				if _, err := b.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1, Refund: true}); err != nil {
					return err
				}
			}
			return nil
		},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, job())
		}()
	}
	wg.Wait()
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	got, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.EqualValues(t, n, got, "b's hits refunded, a's hits kept")
}

// racedStore's windows let "another process" fill key raced's window to
// its limit right before the core's own hit of it, after the set's peek: the
// race only a store shared by several processes allows.
type racedStore struct {
	core.DBStore
	raced string
}

type racedWindow struct {
	*ratedb.Window
	raced string
}

func (s racedStore) Window(alg ratedb.Algorithm, scale time.Duration) (core.WindowLimiter, error) {
	w, err := s.DB.Window(alg, scale)
	if err != nil {
		return nil, err
	}
	return &racedWindow{Window: w, raced: s.raced}, nil
}

func (w *racedWindow) Hit(ctx context.Context, key string, limit, increment int64) (ratedb.Result, error) {
	if key == w.raced {
		if n, err := w.Get(ctx, key); err != nil || n < limit {
			if _, err := w.Inc(ctx, key, limit-n); err != nil {
				return ratedb.Result{}, err
			}
		}
	}
	return w.Window.Hit(ctx, key, limit, increment)
}

// A set whose hit loses a race with another process after the peek is
// denied and counts nothing: the checks after it are not counted, its
// refunds are not applied, and the hits before it, of a window and of
// layered tiers, are undone.
func TestSetDeniedAfterPeekCountsNothing(t *testing.T) {
	_, db, now := newCore(t, core.Options{})
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	c := core.New(racedStore{DBStore: core.DBStore{DB: db}, raced: "b"}, core.Options{Clock: clock})
	ctx := context.Background()
	l := window("r", 5, time.Minute)
	tiers := []ratedb.Tier{{Scale: time.Minute, Limit: 5}, {Scale: time.Hour, Limit: 50}}
	ll := &core.Limit{Name: "t", Algorithm: ratedb.FixedWindow, Tiers: tiers, Layered: true}
	d, err := c.Decide(ctx, core.Check{Limit: l, Key: "refunded", Cost: 3})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = c.Decide(ctx, core.Check{Limit: l, Key: "a", Cost: 1})
	require.NoError(t, err)
	require.True(t, d.Allowed)

	d, err = c.Decide(ctx,
		core.Check{Limit: l, Key: "a", Cost: 2},
		core.Check{Limit: ll, Key: "a", Cost: 2},
		core.Check{Limit: l, Key: "refunded", Cost: 1, Refund: true},
		core.Check{Limit: l, Key: "b", Cost: 1},
		core.Check{Limit: l, Key: "c", Cost: 1},
	)
	require.NoError(t, err)
	assert.False(t, d.Allowed, "b was full by the time it was hit")
	for i, r := range d.Results {
		assert.False(t, r.Counted, "check %d", i)
	}
	assert.Equal(t, int64(1), d.Results[0].Count, "an undone check reports the state before the set")
	assert.True(t, d.Results[0].Allowed, "an undone check still fit")

	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	for key, want := range map[string]int64{"a": 1, "b": 5, "c": 0, "refunded": 3} {
		n, err := w.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, want, n, "key %s", key)
	}
	lt, err := db.Layered(ratedb.FixedWindow, tiers...)
	require.NoError(t, err)
	counts, err := lt.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 0}, counts, "the layered hit was undone")
}

// A refund of cost 0 in a set gives nothing back and is no error.
func TestSetZeroCostRefund(t *testing.T) {
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
func TestRefundWithoutWindowReportsPeek(t *testing.T) {
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

// A refund on a counter whose count is over this limit's (another limit
// with the same algorithm and window shares the key's counter, or the limit
// was lowered, which keeps the counts) reports Remaining 0, never negative:
// Remaining is max(0, Limit-Count).
func TestRefundRemainingNeverNegative(t *testing.T) {
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

// A refund in a set that another check denied is reported allowed, with the
// state before it and no RetryAfter (RetryAfter is 0 when allowed), even
// when its key is full.
func TestDeniedSetRefundHasNoRetryAfter(t *testing.T) {
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
