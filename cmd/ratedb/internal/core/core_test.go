package core_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newCore opens a DB in a temporary file with a clock tests move by hand.
func newCore(t *testing.T, opts core.Options) (*core.Core, *ratedb.DB, *atomic.Int64) {
	t.Helper()
	var now atomic.Int64
	now.Store(t0.UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "c.db"), &ratedb.Options{Clock: clock, MaxHotKeys: 1000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	opts.Clock = clock
	return core.New(core.DBStore{DB: db}, opts), db, &now
}

func window(name string, limit int64, scale time.Duration) *core.Limit {
	return &core.Limit{Name: name, Algorithm: ratedb.FixedWindow, Tiers: []ratedb.Tier{{Scale: scale, Limit: limit}}}
}

func TestSingleCheck(t *testing.T) {
	c, _, now := newCore(t, core.Options{})
	l := window("r", 3, time.Minute)
	ctx := context.Background()
	for i := range 3 {
		d, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
		require.NoError(t, err)
		assert.True(t, d.Allowed, "hit %d", i)
		assert.Equal(t, int64(2-i), d.Results[0].Remaining)
		assert.True(t, d.Results[0].Counted)
	}
	d, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.False(t, d.Results[0].Counted)
	assert.Equal(t, time.Minute, d.Results[0].RetryAfter)
	now.Add(time.Minute.Milliseconds())
	d, err = c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
	require.NoError(t, err)
	assert.True(t, d.Allowed, "a new window")
}

func TestPeekCountsNothing(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	l := window("r", 2, time.Minute)
	ctx := context.Background()
	peek := func() core.CheckResult {
		d, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 0})
		require.NoError(t, err)
		assert.False(t, d.Results[0].Counted)
		return d.Results[0]
	}
	r := peek()
	assert.True(t, r.Allowed)
	assert.Equal(t, int64(2), r.Remaining)
	assert.True(t, t0.Add(time.Minute).Equal(r.ResetAt), "a fixed window's next end: %v", r.ResetAt)
	_, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 2})
	require.NoError(t, err)
	r = peek()
	assert.False(t, r.Allowed, "a hit of 1 would not fit")
	assert.Equal(t, int64(2), r.Count)
	assert.Equal(t, time.Minute, r.RetryAfter)
}

func TestSetAllOrNothing(t *testing.T) {
	c, db, _ := newCore(t, core.Options{})
	a, b := window("a", 1, time.Minute), window("b", 5, time.Minute)
	ctx := context.Background()
	d, err := c.Decide(ctx, core.Check{Limit: a, Key: "x", Cost: 1}, core.Check{Limit: b, Key: "y", Cost: 1})
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = c.Decide(ctx, core.Check{Limit: b, Key: "y", Cost: 1}, core.Check{Limit: a, Key: "x", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.True(t, d.Results[0].Allowed, "y fit on its own")
	assert.False(t, d.Results[0].Counted)
	assert.False(t, d.Results[1].Allowed)
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	n, err := w.Get(ctx, "y")
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the denied set counted nothing in y")
}

func TestSetSameKeyTwice(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	a := window("a", 3, time.Minute)
	ctx := context.Background()
	// 2 + 2 > 3: the second check sees the first one's cost.
	d, err := c.Decide(ctx, core.Check{Limit: a, Key: "x", Cost: 2}, core.Check{Limit: a, Key: "x", Cost: 2})
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	d, err = c.Decide(ctx, core.Check{Limit: a, Key: "x", Cost: 3})
	require.NoError(t, err)
	assert.True(t, d.Allowed, "nothing was counted")
}

func TestShadow(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	s := window("s", 1, time.Minute)
	s.Shadow = true
	e := window("e", 10, time.Minute)
	ctx := context.Background()
	for range 2 {
		d, err := c.Decide(ctx, core.Check{Limit: s, Key: "x", Cost: 1}, core.Check{Limit: e, Key: "y", Cost: 1})
		require.NoError(t, err)
		assert.True(t, d.Allowed, "a shadow limit never denies")
		assert.True(t, d.Results[0].Shadow)
		assert.True(t, d.Results[1].Counted)
	}
	d, err := c.Decide(ctx, core.Check{Limit: s, Key: "x", Cost: 1})
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.False(t, d.Results[0].Allowed, "the shadow verdict is reported")
	assert.False(t, d.Results[0].Counted)
}

func TestLayered(t *testing.T) {
	c, _, now := newCore(t, core.Options{})
	l := &core.Limit{Name: "l", Algorithm: ratedb.FixedWindow, Layered: true,
		Tiers: []ratedb.Tier{{Scale: time.Minute, Limit: 1}, {Scale: time.Hour, Limit: 2}}}
	ctx := context.Background()
	hit := func() core.Decision {
		d, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
		require.NoError(t, err)
		return d
	}
	assert.True(t, hit().Allowed)
	d := hit()
	assert.False(t, d.Allowed)
	assert.Equal(t, 0, d.Results[0].Tier)
	now.Add(time.Minute.Milliseconds())
	assert.True(t, hit().Allowed)
	now.Add(time.Minute.Milliseconds())
	d = hit()
	assert.False(t, d.Allowed)
	assert.Equal(t, 1, d.Results[0].Tier, "the hour binds")
	require.Len(t, d.Results[0].Tiers, 2)
	// A peek in a set reports the layered state too.
	d, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 0}, core.Check{Limit: window("w", 1, time.Minute), Key: "z", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed, "a full key denies the set even when peeked")
	assert.Equal(t, 1, d.Results[0].Tier)
	assert.True(t, d.Results[1].Allowed)
	assert.False(t, d.Results[1].Counted)
}

func TestInvalidChecks(t *testing.T) {
	c, _, _ := newCore(t, core.Options{})
	l := window("r", 3, time.Minute)
	cases := map[string][]core.Check{
		"none":          nil,
		"no limit":      {{Key: "k", Cost: 1}},
		"empty key":     {{Limit: l, Cost: 1}},
		"long key":      {{Limit: l, Key: string(make([]byte, ratedb.MaxKeyLen+1)), Cost: 1}},
		"negative cost": {{Limit: l, Key: "k", Cost: -1}},
		"no tiers":      {{Limit: &core.Limit{Name: "x", Algorithm: ratedb.FixedWindow}, Key: "k", Cost: 1}},
		"bad algorithm": {{Limit: &core.Limit{Name: "x", Tiers: []ratedb.Tier{{Scale: time.Second, Limit: 1}}}, Key: "k", Cost: 1}},
		"bad scale":     {{Limit: window("x", 1, time.Microsecond), Key: "k", Cost: 1}},
	}
	for name, checks := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.Decide(context.Background(), checks...)
			assert.ErrorIs(t, err, core.ErrInvalidCheck)
		})
	}
}

// downStore is a store whose every call fails as a network store that is
// down does.
type downStore struct{}

func (downStore) Window(ratedb.Algorithm, time.Duration) (core.WindowLimiter, error) {
	return downWindow{}, nil
}

func (downStore) Layered(ratedb.Algorithm, ...ratedb.Tier) (core.LayeredLimiter, error) {
	return nil, errors.New("unused")
}

type downWindow struct{}

func (downWindow) Hit(context.Context, string, int64, int64) (ratedb.Result, error) {
	return ratedb.Result{}, fmt.Errorf("down: %w", ratedb.ErrUnavailable)
}
func (downWindow) Get(context.Context, string) (int64, error) {
	return 0, fmt.Errorf("down: %w", ratedb.ErrUnavailable)
}
func (downWindow) ExpiresAt(context.Context, string) (time.Time, error) {
	return time.Time{}, fmt.Errorf("down: %w", ratedb.ErrUnavailable)
}

func TestStoreFailure(t *testing.T) {
	l := window("r", 3, time.Minute)
	ctx := context.Background()
	_, err := core.New(downStore{}, core.Options{}).Decide(ctx, core.Check{Limit: window("r", 3, time.Minute), Key: "k", Cost: 1})
	assert.ErrorIs(t, err, ratedb.ErrUnavailable)
	d, err := core.New(downStore{}, core.Options{FailOpen: true}).Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1}, core.Check{Limit: l, Key: "j", Cost: 1})
	require.NoError(t, err)
	assert.True(t, d.Allowed)
	assert.True(t, d.FailedOpen)
}

// TestConcurrentSetsExact runs sets over two keys and single checks on each
// key at once: no set may count in one key and not the other, and no key may
// pass its limit.
func TestConcurrentSetsExact(t *testing.T) {
	c, db, _ := newCore(t, core.Options{})
	a, b := window("a", 200, time.Minute), window("b", 300, time.Minute)
	ctx := context.Background()
	var sets, singlesA, singlesB atomic.Int64
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for range 200 {
				var checks []core.Check
				switch g % 3 {
				case 0:
					checks = []core.Check{{Limit: a, Key: "x", Cost: 1}, {Limit: b, Key: "y", Cost: 1}}
				case 1:
					checks = []core.Check{{Limit: b, Key: "y", Cost: 1}}
				default:
					checks = []core.Check{{Limit: a, Key: "x", Cost: 1}}
				}
				d, err := c.Decide(ctx, checks...)
				if !assert.NoError(t, err) {
					return
				}
				if d.Allowed {
					switch g % 3 {
					case 0:
						sets.Add(1)
					case 1:
						singlesB.Add(1)
					default:
						singlesA.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	x, err := w.Get(ctx, "x")
	require.NoError(t, err)
	y, err := w.Get(ctx, "y")
	require.NoError(t, err)
	assert.Equal(t, int64(200), x, "x is exhausted exactly")
	assert.Equal(t, int64(300), y, "y is exhausted exactly")
	assert.Equal(t, x, sets.Load()+singlesA.Load())
	assert.Equal(t, y, sets.Load()+singlesB.Load())
}
