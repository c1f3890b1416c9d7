package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerClockKeyExpiresWhenItsWindowEnds: with ServerClock, the window
// end and the key's expiry are both on Redis's clock, so every call that
// writes a counter key (Hit, Inc, Set, Refund and Undo of a Window; Hit,
// Inc, Refund and Undo of a Layered limiter, whose key expires with its
// latest tier) leaves it expiring exactly when its window ends (SET … PXAT
// end): never before (a key gone while its window is open would forget the
// count), and not after (PEXPIRETIME against the end the call reported, for
// every algorithm, with DedupWindow off and on).
func TestServerClockKeyExpiresWhenItsWindowEnds(t *testing.T) {
	srv := startServer(t)
	client := srv.Client(t, nil)
	ctx := context.Background()
	for _, dedup := range []time.Duration{0, 5 * time.Second} {
		s, err := redisstore.New(client, &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second, DedupWindow: dedup})
		require.NoError(t, err)
		for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow} {
			w, err := s.Window(alg, time.Hour)
			require.NoError(t, err)
			l, err := s.Layered(alg, ratedb.Tier{Scale: time.Hour, Limit: 100}, ratedb.Tier{Scale: time.Minute, Limit: 100})
			require.NoError(t, err)
			expires := func(redisKey string, call string, end time.Time) {
				t.Helper()
				require.False(t, end.IsZero(), "%v, dedup %v, %s: an open window", alg, dedup, call)
				d, err := client.PExpireTime(ctx, redisKey).Result()
				require.NoError(t, err)
				require.Positive(t, d, "%v, dedup %v, %s: the key has an expiry", alg, dedup, call)
				assert.Equal(t, end.UnixMilli(), d.Milliseconds(), "%v, dedup %v, %s: the key expires at its window's end", alg, dedup, call)
			}
			wKey := func(key string) string { k, _ := w.HitArgs(key, 1, 1); return k[0] }
			lKey := func(key string) string { k, _ := l.HitArgs(key, 1); return k[0] }
			latest := func(key string) time.Time {
				ends, err := l.ExpiresAt(ctx, key)
				require.NoError(t, err)
				var m time.Time
				for _, e := range ends {
					if e.After(m) {
						m = e
					}
				}
				return m
			}

			r, err := w.Hit(ctx, "hit", 10, 1)
			require.NoError(t, err)
			expires(wKey("hit"), "Hit", r.ResetAt)
			_, err = w.Inc(ctx, "inc", 1)
			require.NoError(t, err)
			end, err := w.ExpiresAt(ctx, "inc")
			require.NoError(t, err)
			expires(wKey("inc"), "Inc", end)
			_, err = w.Set(ctx, "set", 3)
			require.NoError(t, err)
			end, err = w.ExpiresAt(ctx, "set")
			require.NoError(t, err)
			expires(wKey("set"), "Set", end)
			_, end, err = w.Refund(ctx, "set", 1)
			require.NoError(t, err)
			expires(wKey("set"), "Refund", end)
			require.NoError(t, w.Undo(ctx, "hit", r, 1))
			expires(wKey("hit"), "Undo", r.ResetAt)

			lr, err := l.Hit(ctx, "hit", 1)
			require.NoError(t, err)
			expires(lKey("hit"), "Layered.Hit", latest("hit"))
			_, err = l.Inc(ctx, "inc", 2)
			require.NoError(t, err)
			expires(lKey("inc"), "Layered.Inc", latest("inc"))
			_, err = l.Refund(ctx, "inc", 1)
			require.NoError(t, err)
			expires(lKey("inc"), "Layered.Refund", latest("inc"))
			require.NoError(t, l.Undo(ctx, "hit", lr, 1))
			expires(lKey("hit"), "Layered.Undo", latest("hit"))
		}
	}
}

// With ServerClock a key expires at its window's end, whenever within the
// script Redis takes its time for the expiry. The scripts wrote PX (end -
// now), which Redis adds to its own time of the command: on Redis 7.0 the
// time of the SET, after the script's TIME (the key expired a millisecond
// late whenever a millisecond began between the two: about 1 call in 600
// here, so 10,000 calls all but always meet one); from Redis 7.2 on the
// time the script started, before its TIME, so the key could expire before
// its window's end, and a call in that gap found no key and counted the
// window again from zero. PXAT end does not depend on that time at all.
func TestServerClockKeyExpiryIsTheWindowEndOnEveryCall(t *testing.T) {
	srv := startServer(t)
	client := srv.Client(t, nil)
	ctx := context.Background()
	s, err := redisstore.New(client, &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second})
	require.NoError(t, err)
	w, err := s.Window(ratedb.PerKeyWindow, time.Hour)
	require.NoError(t, err)
	l, err := s.Layered(ratedb.PerKeyWindow, ratedb.Tier{Scale: time.Minute, Limit: 10}, ratedb.Tier{Scale: time.Hour, Limit: 10})
	require.NoError(t, err)
	late := 0
	for i := range 10000 {
		key := "k" + strconv.Itoa(i)
		var r ratedb.Result
		var redisKey string
		if i%2 == 0 {
			r, err = w.Hit(ctx, key, 10, 1)
			k, _ := w.HitArgs(key, 10, 1)
			redisKey = k[0]
		} else {
			r, err = l.Hit(ctx, key, 1)
			k, _ := l.HitArgs(key, 1)
			redisKey = k[0]
			r.ResetAt = r.Tiers[1].ResetAt // the latest tier's end
		}
		require.NoError(t, err)
		d, err := client.PExpireTime(ctx, redisKey).Result()
		require.NoError(t, err)
		require.LessOrEqual(t, r.ResetAt.UnixMilli(), d.Milliseconds(), "call %d: the key expires before its window's end", i)
		if d.Milliseconds() != r.ResetAt.UnixMilli() {
			late++
		}
	}
	assert.Zero(t, late, "calls whose key expires after its window's end")
}
