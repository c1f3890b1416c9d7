package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/require"
)

// TestSameErrorsAsTheEmbeddedDB: random, often invalid, arguments; both
// backends must give the same answer or the same error.
func TestSameErrorsAsTheEmbeddedDB(t *testing.T) {
	srv := startServer(t)
	client := srv.Client(t, nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	var nilCtx context.Context
	ctxs := []context.Context{context.Background(), context.Background(), context.Background(), cancelled, nilCtx}
	keys := []string{"", "a", strings.Repeat("x", 4096), strings.Repeat("x", 4097)}
	nums := []int64{math.MinInt64, -1, 0, 1, 2, 5, redisstore.MaxCount, math.MaxInt64}
	times := []int64{-1, 0, 1_767_225_600_000, 253_402_300_799_999, 253_402_300_800_000}
	for seed := range 400 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		clk := &stepClock{now: time.UnixMilli(1_767_225_600_000), last: time.Now()}
		db, err := ratedb.Open("", &ratedb.Options{Clock: clk.Now})
		require.NoError(t, err)
		st, err := redisstore.New(client, &redisstore.Options{Prefix: newPrefix(), Clock: redisstore.LocalClock(clk.Now), Timeout: 5 * time.Second})
		require.NoError(t, err)
		alg := ratedb.Algorithm(1 + rng.IntN(3))
		we, _ := db.Window(alg, time.Minute)
		wr, _ := st.Window(alg, time.Minute)
		w2e, _ := db.Window(alg, time.Hour)
		tiers := []ratedb.Tier{{Scale: time.Hour, Limit: 5}, {Scale: time.Minute, Limit: 3}}
		le, _ := db.Layered(alg, tiers...)
		lr, _ := st.Layered(alg, tiers...)
		l1e, _ := db.Layered(alg, tiers[0])
		var results []ratedb.Result
		for step := range 300 {
			if rng.IntN(10) == 0 {
				clk.mu.Lock()
				clk.now = time.UnixMilli(times[rng.IntN(len(times))])
				clk.mu.Unlock()
			} else if rng.IntN(10) == 0 {
				clk.mu.Lock()
				clk.now = time.UnixMilli(1_767_225_600_000 + int64(step)*1000)
				clk.mu.Unlock()
			}
			ctx := ctxs[rng.IntN(len(ctxs))]
			key := keys[rng.IntN(len(keys))]
			n1, n2 := nums[rng.IntN(len(nums))], nums[rng.IntN(len(nums))]
			if n1 > redisstore.MaxCount || n2 > redisstore.MaxCount {
				n1, n2 = min(n1, 3), min(n2, 3) // MaxCount: a documented difference
			}
			var a, b any
			var call string
			switch rng.IntN(12) {
			case 0:
				call = fmt.Sprintf("Hit(%q, %d, %d)", key, n1, n2)
				r1, e1 := we.Hit(ctx, key, n1, n2)
				r2, e2 := wr.Hit(ctx, key, n1, n2)
				a, b = []any{r1, errClass(e1)}, []any{r2, errClass(e2)}
				if e1 == nil {
					results = append(results, r1)
				}
			case 1:
				n1 = min(n1, 3)
				if g, _ := we.Get(context.Background(), key); g > redisstore.MaxCount-3 {
					continue
				}
				call = fmt.Sprintf("Inc(%q, %d)", key, n1)
				x1, e1 := we.Inc(ctx, key, n1)
				x2, e2 := wr.Inc(ctx, key, n1)
				a, b = []any{x1, errClass(e1)}, []any{x2, errClass(e2)}
			case 2:
				n1 = min(n1, 3)
				call = fmt.Sprintf("Set(%q, %d)", key, n1)
				x1, e1 := we.Set(ctx, key, n1)
				x2, e2 := wr.Set(ctx, key, n1)
				a, b = []any{x1, errClass(e1)}, []any{x2, errClass(e2)}
			case 3:
				call = fmt.Sprintf("Refund(%q, %d)", key, n1)
				x1, t1, e1 := we.Refund(ctx, key, n1)
				x2, t2, e2 := wr.Refund(ctx, key, n1)
				a, b = []any{x1, t1, errClass(e1)}, []any{x2, t2, errClass(e2)}
			case 4:
				var r ratedb.Result
				switch rng.IntN(4) {
				case 0:
				case 1:
					r, _ = w2e.Hit(context.Background(), "z", 1, 1)
				case 2:
					r, _ = le.Hit(context.Background(), "z", 1)
				default:
					if len(results) > 0 {
						r = results[rng.IntN(len(results))]
					}
				}
				call = fmt.Sprintf("Undo(%q, %+v, %d)", key, r, n1)
				a, b = errClass(we.Undo(ctx, key, r, n1)), errClass(wr.Undo(ctx, key, r, n1))
			case 5:
				call = fmt.Sprintf("Get/ExpiresAt/Reset(%q)", key)
				x1, e1 := we.Get(ctx, key)
				x2, e2 := wr.Get(ctx, key)
				y1, f1 := we.ExpiresAt(ctx, key)
				y2, f2 := wr.ExpiresAt(ctx, key)
				a, b = []any{x1, errClass(e1), y1, errClass(f1)}, []any{x2, errClass(e2), y2, errClass(f2)}
				if rng.IntN(4) == 0 {
					a, b = append(a.([]any), errClass(we.Reset(ctx, key))), append(b.([]any), errClass(wr.Reset(ctx, key)))
				}
			case 6:
				call = fmt.Sprintf("L.Hit(%q, %d)", key, n1)
				r1, e1 := le.Hit(ctx, key, n1)
				r2, e2 := lr.Hit(ctx, key, n1)
				a, b = []any{r1, errClass(e1)}, []any{r2, errClass(e2)}
				if e1 == nil {
					results = append(results, r1)
				}
			case 7:
				n1 = min(n1, 3)
				if g, _ := le.Get(context.Background(), key); slicesAnyOver(g, redisstore.MaxCount-3) {
					continue
				}
				call = fmt.Sprintf("L.Inc(%q, %d)", key, n1)
				x1, e1 := le.Inc(ctx, key, n1)
				x2, e2 := lr.Inc(ctx, key, n1)
				a, b = []any{x1, errClass(e1)}, []any{x2, errClass(e2)}
			case 8:
				call = fmt.Sprintf("L.Refund(%q, %d)", key, n1)
				x1, e1 := le.Refund(ctx, key, n1)
				x2, e2 := lr.Refund(ctx, key, n1)
				a, b = []any{x1, errClass(e1)}, []any{x2, errClass(e2)}
			case 9:
				var r ratedb.Result
				switch rng.IntN(4) {
				case 0:
				case 1:
					r, _ = we.Hit(context.Background(), "z", 1, 1)
				case 2:
					r, _ = l1e.Hit(context.Background(), "z", 1)
				default:
					if len(results) > 0 {
						r = results[rng.IntN(len(results))]
					}
				}
				call = fmt.Sprintf("L.Undo(%q, %+v, %d)", key, r, n1)
				a, b = errClass(le.Undo(ctx, key, r, n1)), errClass(lr.Undo(ctx, key, r, n1))
			case 10:
				call = fmt.Sprintf("L.Get/ExpiresAt/Reset(%q)", key)
				x1, e1 := le.Get(ctx, key)
				x2, e2 := lr.Get(ctx, key)
				y1, f1 := le.ExpiresAt(ctx, key)
				y2, f2 := lr.ExpiresAt(ctx, key)
				a, b = []any{x1, errClass(e1), y1, errClass(f1)}, []any{x2, errClass(e2), y2, errClass(f2)}
				if rng.IntN(4) == 0 {
					a, b = append(a.([]any), errClass(le.Reset(ctx, key))), append(b.([]any), errClass(lr.Reset(ctx, key)))
				}
			case 11:
				// constructors
				sc := []time.Duration{0, -time.Second, time.Microsecond, 1500 * time.Microsecond, time.Millisecond, math.MaxInt64}[rng.IntN(6)]
				al := ratedb.Algorithm(rng.IntN(5))
				_, e1 := db.Window(al, sc)
				_, e2 := st.Window(al, sc)
				ts := make([]ratedb.Tier, rng.IntN(18))
				for i := range ts {
					ts[i] = ratedb.Tier{Scale: time.Duration(1+rng.IntN(3)) * sc, Limit: nums[rng.IntN(len(nums))]}
				}
				_, f1 := db.Layered(al, ts...)
				_, f2 := st.Layered(al, ts...)
				call = fmt.Sprintf("Window(%v, %v), Layered(%v, %v)", al, sc, al, ts)
				a, b = []any{errClass(e1), errClass(f1)}, []any{errClass(e2), errClass(f2)}
			}
			if len(call) > 400 {
				call = call[:400]
			}
			if !reflect.DeepEqual(comparable(a), comparable(b)) {
				t.Fatalf("seed %d step %d %v now %d: %s\nembedded: %v\nredis:    %v", seed, step, alg, clk.Now().UnixMilli(), call, comparable(a), comparable(b))
			}
		}
		require.NoError(t, db.Close())
	}
}
