package ratedb_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// State reads what Get and ExpiresAt read, for a Window and every tier of
// a Layered limiter: nothing before a hit, the window after, nothing once it
// has ended.
func TestStateIsGetAndExpiresAt(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		c := newClock()
		db := openDB(t, path, testOptions(c))
		w, err := db.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		l, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5}, ratedb.Tier{Scale: time.Hour, Limit: 50})
		require.NoError(t, err)
		agree := func(what string) {
			t.Helper()
			n, end, err := w.State(ctx, "k")
			require.NoError(t, err)
			gn, err := w.Get(ctx, "k")
			require.NoError(t, err)
			gend, err := w.ExpiresAt(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, gn, n, what)
			assert.Equal(t, gend, end, what)
			ns, ends, err := l.State(ctx, "k")
			require.NoError(t, err)
			gns, err := l.Get(ctx, "k")
			require.NoError(t, err)
			gends, err := l.ExpiresAt(ctx, "k")
			require.NoError(t, err)
			assert.Equal(t, gns, ns, what)
			assert.Equal(t, gends, ends, what)
		}
		agree("before any hit")
		for range 3 {
			_, err = w.Hit(ctx, "k", 5, 1)
			require.NoError(t, err)
			_, err = l.Hit(ctx, "k", 1)
			require.NoError(t, err)
		}
		agree("after three hits")
		n, _, err := w.State(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, int64(3), n)
		c.Advance(time.Minute)
		agree("the minute over, the hour not")
		c.Advance(time.Hour)
		agree("every window over")
		_, _, err = w.State(ctx, "")
		assert.ErrorIs(t, err, ratedb.ErrInvalidArgument)
	})
}

// State reads one window: read while hits open window after window, the
// count it reports is never more than the hits its window got. (Read with Get
// and then ExpiresAt, a window's count can come with the next window's end.)
// Window i of the run gets i%3+1 hits, so a full window's count paired with
// the next, smaller, window's end is caught.
func TestStateReadsOneWindow(t *testing.T) {
	c := newClock()
	db := openDB(t, "", testOptions(c))
	const scale = time.Second
	w, err := db.Window(ratedb.PerKeyWindow, scale)
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		hits    = map[int64]int64{} // window end (ms) -> hits it will get
		done    atomic.Bool
		stopped atomic.Bool // the reader returned
		wg      sync.WaitGroup
		reads   atomic.Int64
	)
	wg.Go(func() {
		defer done.Store(true)
		for i := range 1500 {
			k := int64(i%3 + 1)
			for j := range k {
				r, err := w.Hit(ctx, "k", 10, 1)
				if !assert.NoError(t, err) || !assert.True(t, r.Allowed) {
					return
				}
				if j == 0 {
					mu.Lock()
					hits[r.ResetAt.UnixMilli()] = k
					mu.Unlock()
				}
			}
			c.Advance(scale)
			// Every few windows, wait for a read: the reader must run
			// while windows change, not only once the hitter is done.
			if i%8 == 0 {
				for r := reads.Load(); reads.Load() == r && !stopped.Load(); {
					runtime.Gosched()
				}
			}
		}
	})
	wg.Go(func() {
		defer stopped.Store(true)
		for !done.Load() {
			n, end, err := w.State(ctx, "k")
			if !assert.NoError(t, err) {
				return
			}
			reads.Add(1)
			if end.IsZero() {
				continue
			}
			mu.Lock()
			k, ok := hits[end.UnixMilli()]
			mu.Unlock()
			if ok && n > k {
				t.Errorf("State read %d hits for the window ending at %v, which got %d", n, end, k)
				return
			}
		}
	})
	wg.Wait()
	assert.GreaterOrEqual(t, reads.Load(), int64(1500/8), "reads while windows changed")
}

// A hit whose increment exceeds its limit is denied whatever the key's
// state. On a key with no open window it now brings nothing into memory:
// before, it left an empty entry there (counted in WindowsInMemory, holding
// a place in the cache) until the janitor took it out, for every key a
// deny-all rule (limit 0) refused. Its answer is unchanged: count 0 and the
// window a hit at that instant opens; a PerKeyWindow key's window still
// starts at its first allowed hit.
func TestHitDeniedOutrightLeavesNoState(t *testing.T) {
	for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow} {
		t.Run(alg.String(), func(t *testing.T) {
			modes(t, func(t *testing.T, path string) {
				c := newClock()
				c.Advance(1234 * time.Millisecond)
				db := openDB(t, path, testOptions(c))
				w, err := db.Window(alg, time.Minute)
				require.NoError(t, err)
				l, err := db.Layered(alg, ratedb.Tier{Scale: time.Hour, Limit: 5}, ratedb.Tier{Scale: time.Minute, Limit: 2})
				require.NoError(t, err)

				var denied []ratedb.Result
				for _, limit := range []int64{0, 2} {
					for _, key := range []string{"k", "p"} {
						r, err := w.Hit(ctx, key, limit, 3)
						require.NoError(t, err)
						assert.False(t, r.Allowed)
						assert.Zero(t, r.Count)
						assert.Equal(t, limit, r.Limit)
						assert.Equal(t, limit, r.Remaining)
						assert.Equal(t, r.ResetAt.Sub(c.Now()), r.RetryAfter)
						denied = append(denied, r)
					}
				}
				ld, err := l.Hit(ctx, "k", 3)
				require.NoError(t, err)
				assert.False(t, ld.Allowed)
				assert.Equal(t, 1, ld.Tier, "the minute tier denies")
				assert.Equal(t, []int64{0, 0}, []int64{ld.Tiers[0].Count, ld.Tiers[1].Count})
				assert.Equal(t, []bool{true, false}, []bool{ld.Tiers[0].Fits, ld.Tiers[1].Fits})
				st := db.Stats()
				assert.Zero(t, st.WindowsInMemory, "a hit denied outright left state behind")
				assert.Equal(t, int64(5), st.Denied)

				// At the same instant, an allowed hit opens the windows the
				// denials reported.
				ra, err := w.Hit(ctx, "k", 5, 1)
				require.NoError(t, err)
				require.True(t, ra.Allowed)
				assert.True(t, ra.ResetAt.Equal(denied[0].ResetAt))
				assert.True(t, ra.ResetAt.Equal(denied[2].ResetAt))
				la, err := l.Hit(ctx, "k", 1)
				require.NoError(t, err)
				require.True(t, la.Allowed)
				for i := range la.Tiers {
					assert.True(t, la.Tiers[i].ResetAt.Equal(ld.Tiers[i].ResetAt), "tier %d", i)
				}
				assert.Equal(t, int64(2), db.Stats().WindowsInMemory)

				// On a key with an open window, the same hit is denied by
				// the usual path, with the window's count.
				rd, err := w.Hit(ctx, "k", 2, 3)
				require.NoError(t, err)
				assert.False(t, rd.Allowed)
				assert.Equal(t, int64(1), rd.Count)
				assert.True(t, rd.ResetAt.Equal(ra.ResetAt))

				// p's denials opened no window: its first allowed hit does.
				c.Advance(7 * time.Second)
				rp, err := w.Hit(ctx, "p", 5, 1)
				require.NoError(t, err)
				require.True(t, rp.Allowed)
				if alg == ratedb.PerKeyWindow {
					assert.True(t, rp.ResetAt.Equal(c.Now().Add(time.Minute)), "the window starts at the first allowed hit")
				}
			})
		})
	}
}
