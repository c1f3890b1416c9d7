package redisstore_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A counter key holding a value this store never writes (another program
// wrote it) must make every call that reads it fail with a clear error, as
// Get does (decodeRead: ErrUnavailable), and must not be overwritten: no
// silent reset, no decision, no "nothing to refund". Set fails on it too
// (TestSetRefusesTheValuesGetAndHitRefuse has every algorithm); only Reset
// deletes it.
func TestForeignValueIsAnErrorNotAReset(t *testing.T) {
	srv := startServer(t)
	raw := srv.Client(t, nil)
	future := strconv.FormatInt(time.Now().Add(30*time.Minute).UnixMilli(), 10)
	for _, dedup := range []time.Duration{0, time.Second} {
		// Each case is a Window's value and a Layered one's (two tiers);
		// the scripts read "count,end" with a count of digits and an end of
		// an optional minus and digits, and several tiers only as this
		// store writes them (no sign, no leading zero).
		for _, vals := range [][2]string{
			{"garbage", "garbage"}, {"5", "5"}, {"x,1", "x,1"}, {"1.5," + future, "1.5," + future},
			{"-3," + future, "-3," + future + ",1," + future},
			{"+5," + future, "+5," + future + ",1," + future},
			{"5,+" + future, "5,+" + future + ",1," + future},
			{"5," + future + " ", "05," + future + ",1," + future},
			// Lua reads 2^53+1 as 2^53: a value of several tiers holding
			// it does not format back as stored.
			{"9007199254740993", "9007199254740993," + future + ",1," + future},
			// A number past MaxCount, in either direction, is no value
			// ratedb wrote (it never stores a count past MaxCount, nor an
			// end that far from 1970): neither Get nor the scripts read it,
			// be it past int64 (Get could not read it, and the scripts
			// counted on it) or past 2^53 (Lua reads it rounded).
			{"1,99999999999999999999", "1,99999999999999999999,1," + future},
			{"1,-99999999999999999999", "1," + future + ",1,-99999999999999999999"},
			{"99999999999999999999," + future, "1," + future + ",99999999999999999999," + future},
			{"9007199254740993," + future, "9007199254740992," + future + ",1," + future},
			{"1,9007199254740993", "1,9007199254740992,1," + future},
			{"1,-9007199254740992", "1," + future + ",1,-9007199254740992"},
		} {
			val, lVal := vals[0], vals[1]
			t.Run(fmt.Sprintf("dedup=%v/%q", dedup, val), func(t *testing.T) {
				prefix := newPrefix()
				s, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: prefix, DedupWindow: dedup, Timeout: time.Second})
				require.NoError(t, err)
				w, err := s.Window(ratedb.FixedWindow, time.Hour)
				require.NoError(t, err)
				l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Hour, Limit: 10}, ratedb.Tier{Scale: 2 * time.Hour, Limit: 10})
				require.NoError(t, err)
				wr, err := w.Hit(ctx, "k", 10, 1)
				require.NoError(t, err)
				lr, err := l.Hit(ctx, "k", 1)
				require.NoError(t, err)
				wKey, lKey := prefix+"{k}:f3600000", prefix+"{k}:Lf3600000,7200000"
				put := func() {
					require.NoError(t, raw.Set(ctx, wKey, val, time.Hour).Err())
					require.NoError(t, raw.Set(ctx, lKey, lVal, time.Hour).Err())
				}
				check := func(call string, err error) {
					t.Helper()
					assert.ErrorIs(t, err, ratedb.ErrUnavailable, "%s on a foreign value must fail", call)
					got, _ := raw.Get(ctx, wKey).Result()
					assert.Equal(t, val, got, "%s: the Window's foreign value was overwritten", call)
					got, _ = raw.Get(ctx, lKey).Result()
					assert.Equal(t, lVal, got, "%s: the Layered's foreign value was overwritten", call)
					put()
				}
				put()
				_, err = w.Get(ctx, "k")
				check("W.Get", err)
				_, err = w.Hit(ctx, "k", 10, 1)
				check("W.Hit", err)
				_, err = w.Inc(ctx, "k", 1)
				check("W.Inc", err)
				_, _, err = w.Refund(ctx, "k", 1)
				check("W.Refund", err)
				check("W.Undo", w.Undo(ctx, "k", wr, 1))
				_, err = l.Get(ctx, "k")
				check("L.Get", err)
				_, err = l.Hit(ctx, "k", 1)
				check("L.Hit", err)
				_, err = l.Inc(ctx, "k", 1)
				check("L.Inc", err)
				_, err = l.Refund(ctx, "k", 1)
				check("L.Refund", err)
				check("L.Undo", l.Undo(ctx, "k", lr, 1))
				_, err = w.ExpiresAt(ctx, "k")
				check("W.ExpiresAt", err)
				_, _, err = w.State(ctx, "k")
				check("W.State", err)
				_, err = l.ExpiresAt(ctx, "k")
				check("L.ExpiresAt", err)
				_, _, err = l.State(ctx, "k")
				check("L.State", err)
				_, err = w.Set(ctx, "k", 1)
				check("W.Set", err)
				// Reset deletes the key whatever it holds: the way to clear it.
				require.NoError(t, w.Reset(ctx, "k"))
				require.NoError(t, l.Reset(ctx, "k"))
				n, err := raw.Exists(ctx, wKey, lKey).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "Reset deletes a foreign value")
			})
		}
	}
}
