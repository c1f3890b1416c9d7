package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/require"
)

// stepClock is a test clock that stands still during a step (so that the
// two backends compared in it read the same instant) and, between steps,
// moves on by at least the real time that passed, plus any jump the test
// makes: Redis counts its TTLs down by its own clock, so a clock slower than
// real time would see keys expire early (see LocalClock).
type stepClock struct {
	mu   sync.Mutex
	now  time.Time
	last time.Time // real time at the last step
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// step starts a step: the clock catches up with real time, then jumps by d
// (a negative d steps it back).
func (c *stepClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	real := time.Now()
	c.now = c.now.Add(real.Sub(c.last) + d)
	c.last = real
}

// errClass names an error by the sentinel it matches, so that both backends'
// errors compare.
func errClass(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, ratedb.ErrInvalidArgument):
		return "invalid: " + err.Error()
	default:
		return "other: " + err.Error()
	}
}

// comparable turns results into values that compare by what they say
// (instants, not time.Time's monotonic readings and locations).
func comparable(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = comparable(x[i])
		}
		return out
	case time.Time:
		if x.IsZero() {
			return int64(0)
		}
		return x.UnixMilli()
	case []time.Time:
		out := make([]int64, len(x))
		for i, t := range x {
			out[i] = comparable(t).(int64)
		}
		return out
	case ratedb.Result:
		x.ResetAt = time.UnixMilli(x.ResetAt.UnixMilli())
		for i := range x.Tiers {
			x.Tiers[i].ResetAt = time.UnixMilli(x.Tiers[i].ResetAt.UnixMilli())
		}
		return fmt.Sprintf("%+v", x)
	}
	return v
}

type stater interface {
	State(ctx context.Context, key string) (int64, time.Time, error)
}

type undoer interface {
	Undo(ctx context.Context, key string, r ratedb.Result, increment int64) error
}

// TestSameAnswersAsTheEmbeddedDB runs random sequences of every call, on
// Windows of every algorithm and on a Layered limiter (tiers given out of
// order, two of one scale), against an embedded DB and a Store on a real
// Redis sharing one clock, and requires the same answer from both, errors
// included. The clock moves forward by random jumps and, now and then,
// steps back by up to a second (the smallest scale): the Store caps a
// window at one scale from now as the embedded DB does.
func TestSameAnswersAsTheEmbeddedDB(t *testing.T) {
	srv := startServer(t)
	client := srv.Client(t, nil)
	ctx := context.Background()
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	algs := []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow}
	scales := []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, time.Minute}
	tiers := []ratedb.Tier{{Scale: 10 * time.Second, Limit: 6}, {Scale: time.Second, Limit: 5}, {Scale: time.Second, Limit: 4}, {Scale: 3 * time.Second, Limit: 9}}
	keys := []string{"a", "b", "}", "{x}", `\)`, `\}`}
	for seed := range seeds {
		clk := &stepClock{now: time.UnixMilli(1_767_225_600_000 + int64(seed)*7919), last: time.Now()}
		db, err := ratedb.Open("", &ratedb.Options{Clock: clk.Now})
		require.NoError(t, err)
		st, err := redisstore.New(client, &redisstore.Options{Prefix: newPrefix(), Clock: redisstore.LocalClock(clk.Now), Timeout: 5 * time.Second})
		require.NoError(t, err)
		alg := algs[seed%len(algs)]
		type pair struct{ e, r ratedb.Limiter }
		var ws []pair
		for _, sc := range scales {
			e, err := db.Window(alg, sc)
			require.NoError(t, err)
			r, err := st.Window(alg, sc)
			require.NoError(t, err)
			ws = append(ws, pair{e, r})
		}
		le, err := db.Layered(alg, tiers...)
		require.NoError(t, err)
		lr, err := st.Layered(alg, tiers...)
		require.NoError(t, err)
		lastE, lastR := map[string]ratedb.Result{}, map[string]ratedb.Result{}

		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		for step := range 300 {
			jump := time.Duration(0)
			switch rng.IntN(40) {
			case 0:
				jump = -time.Duration(rng.IntN(1000)) * time.Millisecond
			case 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12:
				jump = time.Duration(rng.IntN(4000)) * time.Millisecond
			}
			clk.step(jump)
			key := keys[rng.IntN(len(keys))]
			wi := rng.IntN(len(ws))
			w := ws[wi]
			wk := fmt.Sprint(wi, key)
			var a, b any
			var call string
			switch op := rng.IntN(15); op {
			case 0, 1, 2:
				limit, inc := int64(rng.IntN(6)), int64(1+rng.IntN(3))
				call = fmt.Sprintf("window %d: Hit(%q, %d, %d)", wi, key, limit, inc)
				r1, e1 := w.e.Hit(ctx, key, limit, inc)
				r2, e2 := w.r.Hit(ctx, key, limit, inc)
				a, b = []any{r1, errClass(e1)}, []any{r2, errClass(e2)}
				lastE[wk], lastR[wk] = r1, r2
			case 3:
				inc := int64(1 + rng.IntN(3))
				call = fmt.Sprintf("window %d: Inc(%q, %d)", wi, key, inc)
				n1, e1 := w.e.Inc(ctx, key, inc)
				n2, e2 := w.r.Inc(ctx, key, inc)
				a, b = []any{n1, errClass(e1)}, []any{n2, errClass(e2)}
			case 4:
				n := int64(rng.IntN(5))
				call = fmt.Sprintf("window %d: Set(%q, %d)", wi, key, n)
				n1, e1 := w.e.Set(ctx, key, n)
				n2, e2 := w.r.Set(ctx, key, n)
				a, b = []any{n1, errClass(e1)}, []any{n2, errClass(e2)}
			case 5:
				n := int64(1 + rng.IntN(3))
				call = fmt.Sprintf("window %d: Refund(%q, %d)", wi, key, n)
				n1, t1, e1 := w.e.Refund(ctx, key, n)
				n2, t2, e2 := w.r.Refund(ctx, key, n)
				a, b = []any{n1, t1, errClass(e1)}, []any{n2, t2, errClass(e2)}
			case 6:
				re, ok := lastE[wk]
				if !ok {
					continue
				}
				call = fmt.Sprintf("window %d: Undo(%q) of %+v", wi, key, re)
				a, b = errClass(w.e.(undoer).Undo(ctx, key, re, 1)), errClass(w.r.(undoer).Undo(ctx, key, lastR[wk], 1))
			case 7:
				call = fmt.Sprintf("window %d: Get, ExpiresAt and State(%q)", wi, key)
				n1, e1 := w.e.Get(ctx, key)
				n2, e2 := w.r.Get(ctx, key)
				x1, f1 := w.e.ExpiresAt(ctx, key)
				x2, f2 := w.r.ExpiresAt(ctx, key)
				s1, t1, g1 := w.e.(stater).State(ctx, key)
				s2, t2, g2 := w.r.(stater).State(ctx, key)
				a, b = []any{n1, errClass(e1), x1, errClass(f1), s1, t1, errClass(g1)}, []any{n2, errClass(e2), x2, errClass(f2), s2, t2, errClass(g2)}
			case 8:
				call = fmt.Sprintf("window %d: Reset(%q)", wi, key)
				a, b = errClass(w.e.Reset(ctx, key)), errClass(w.r.Reset(ctx, key))
			case 9, 10, 11:
				inc := int64(1 + rng.IntN(2))
				call = fmt.Sprintf("layered: Hit(%q, %d)", key, inc)
				r1, e1 := le.Hit(ctx, key, inc)
				r2, e2 := lr.Hit(ctx, key, inc)
				a, b = []any{r1, errClass(e1)}, []any{r2, errClass(e2)}
				lastE["L"+key], lastR["L"+key] = r1, r2
			case 12:
				call = fmt.Sprintf("layered: Refund(%q, 1)", key)
				r1, e1 := le.Refund(ctx, key, 1)
				r2, e2 := lr.Refund(ctx, key, 1)
				a, b = []any{r1, errClass(e1)}, []any{r2, errClass(e2)}
			case 13:
				re, ok := lastE["L"+key]
				if !ok {
					continue
				}
				call = fmt.Sprintf("layered: Undo(%q) of %+v", key, re)
				a, b = errClass(le.Undo(ctx, key, re, 1)), errClass(lr.Undo(ctx, key, lastR["L"+key], 1))
			case 14:
				call = fmt.Sprintf("layered: Get, ExpiresAt, State and Inc(%q, 1)", key)
				g1, e1 := le.Get(ctx, key)
				g2, e2 := lr.Get(ctx, key)
				x1, f1 := le.ExpiresAt(ctx, key)
				x2, f2 := lr.ExpiresAt(ctx, key)
				sn1, st1, sg1 := le.State(ctx, key)
				sn2, st2, sg2 := lr.State(ctx, key)
				i1, h1 := le.Inc(ctx, key, 1)
				i2, h2 := lr.Inc(ctx, key, 1)
				a = []any{g1, errClass(e1), x1, errClass(f1), sn1, st1, errClass(sg1), i1, errClass(h1)}
				b = []any{g2, errClass(e2), x2, errClass(f2), sn2, st2, errClass(sg2), i2, errClass(h2)}
			}
			if !reflect.DeepEqual(comparable(a), comparable(b)) {
				t.Fatalf("seed %d, step %d, %v, now %d: %s\nembedded: %v\nredis:    %v",
					seed, step, alg, clk.Now().UnixMilli(), call, comparable(a), comparable(b))
			}
		}
		require.NoError(t, db.Close())
	}
}

// An Inc that would overflow one tier of a Layered limiter names the tier
// as the caller gave it, as the embedded DB does (tiers are stored by
// ascending scale).
func TestLayeredOverflowNamesTheGivenTier(t *testing.T) {
	srv := startServer(t)
	clk := &stepClock{now: time.UnixMilli(1_767_225_600_000), last: time.Now()}
	db, err := ratedb.Open("", &ratedb.Options{Clock: clk.Now})
	require.NoError(t, err)
	defer db.Close()
	st, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Clock: redisstore.LocalClock(clk.Now)})
	require.NoError(t, err)
	ctx := context.Background()
	tiers := []ratedb.Tier{{Scale: time.Hour, Limit: 1}, {Scale: time.Minute, Limit: 1}}
	le, err := db.Layered(ratedb.FixedWindow, tiers...)
	require.NoError(t, err)
	lr, err := st.Layered(ratedb.FixedWindow, tiers...)
	require.NoError(t, err)
	// Each backend's largest count (the embedded DB's is 2^63-1).
	_, err = le.Inc(ctx, "k", math.MaxInt64)
	require.NoError(t, err)
	_, err = lr.Inc(ctx, "k", redisstore.MaxCount)
	require.NoError(t, err)
	clk.step(2 * time.Minute) // the minute tier starts again; the hour tier is full
	_, e1 := le.Inc(ctx, "k", 1)
	_, e2 := lr.Inc(ctx, "k", 1)
	require.ErrorIs(t, e1, ratedb.ErrInvalidArgument)
	require.ErrorIs(t, e2, ratedb.ErrInvalidArgument)
	require.Contains(t, e1.Error(), "tier 0")
	require.Equal(t, e1.Error(), e2.Error())
}

// An Undo after the clock stepped back and a write cut the hit's window
// short takes from the window opened once the cut one ended, if it ends
// when the hit's did: as in the embedded DB, and as Window.Undo and
// Layered.Undo document.
func TestUndoAfterClockStepBack(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	clk := &stepClock{now: time.UnixMilli(1_767_225_600_000), last: time.Now()}
	db, err := ratedb.Open("", &ratedb.Options{Clock: clk.Now})
	require.NoError(t, err)
	defer db.Close()
	st, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Clock: redisstore.LocalClock(clk.Now), Timeout: 5 * time.Second})
	require.NoError(t, err)
	we, err := db.Window(ratedb.FixedWindow, 10*time.Second)
	require.NoError(t, err)
	wr, err := st.Window(ratedb.FixedWindow, 10*time.Second)
	require.NoError(t, err)
	tier := ratedb.Tier{Scale: 10 * time.Second, Limit: 5}
	le, err := db.Layered(ratedb.FixedWindow, tier)
	require.NoError(t, err)
	lr, err := st.Layered(ratedb.FixedWindow, tier)
	require.NoError(t, err)
	clk.step(100 * time.Millisecond) // the window ends 9.9 s later
	var hits [4]ratedb.Result
	hits[0], err = we.Hit(ctx, "k", 5, 1)
	require.NoError(t, err)
	hits[1], err = wr.Hit(ctx, "k", 5, 1)
	require.NoError(t, err)
	hits[2], err = le.Hit(ctx, "k", 1)
	require.NoError(t, err)
	hits[3], err = lr.Hit(ctx, "k", 1)
	require.NoError(t, err)
	clk.step(-7 * time.Second) // back: an Inc stores the window cut to end one scale from now, 3.1 s after the hit
	_, err = we.Inc(ctx, "k", 1)
	require.NoError(t, err)
	_, err = wr.Inc(ctx, "k", 1)
	require.NoError(t, err)
	_, err = le.Inc(ctx, "k", 1)
	require.NoError(t, err)
	_, err = lr.Inc(ctx, "k", 1)
	require.NoError(t, err)
	clk.step(12 * time.Second) // 5.1 s after the hit: past the cut end, before the hit's
	var fresh [4]ratedb.Result
	fresh[0], err = we.Hit(ctx, "k", 5, 1)
	require.NoError(t, err)
	fresh[1], err = wr.Hit(ctx, "k", 5, 1)
	require.NoError(t, err)
	fresh[2], err = le.Hit(ctx, "k", 1)
	require.NoError(t, err)
	fresh[3], err = lr.Hit(ctx, "k", 1)
	require.NoError(t, err)
	for i, r := range fresh {
		require.Equal(t, int64(1), r.Count, "backend %d: a new window", i)
		require.Equal(t, hits[i].ResetAt, r.ResetAt, "backend %d: ends when the hit's did", i)
	}
	require.NoError(t, we.Undo(ctx, "k", hits[0], 1))
	require.NoError(t, wr.Undo(ctx, "k", hits[1], 1))
	require.NoError(t, le.Undo(ctx, "k", hits[2], 1))
	require.NoError(t, lr.Undo(ctx, "k", hits[3], 1))
	n0, err := we.Get(ctx, "k")
	require.NoError(t, err)
	n1, err := wr.Get(ctx, "k")
	require.NoError(t, err)
	n2, err := le.Get(ctx, "k")
	require.NoError(t, err)
	n3, err := lr.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, []any{int64(0), int64(0), []int64{0}, []int64{0}}, []any{n0, n1, n2, n3},
		"the undo took from the new window")
}
