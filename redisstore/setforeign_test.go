package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Set reads the window end already stored under a key (FixedWindow and
// StaggeredWindow keep it). It must read the stored values the other calls
// read and refuse the others as they do: a value Get and Hit refuse makes
// Set fail with the same error (ErrUnavailable, RATEDB_BADVALUE) and stay
// as it is, whatever the algorithm; a value they read, Set reads too,
// keeping its window's end. Each value is planted in a real Redis and the
// three calls compared on it.
func TestSetRefusesTheValuesGetAndHitRefuse(t *testing.T) {
	srv := startServer(t)
	raw := srv.Client(t, nil)
	// A window end half an hour ahead: open, within the hour's scale.
	futureEnd := time.Now().Add(30 * time.Minute).UnixMilli()
	f := strconv.FormatInt(futureEnd, 10)
	for _, tc := range []struct {
		val     string
		refused bool
	}{
		{"garbage", true},
		{"5", true},
		{"x,1", true},
		{"-3," + f, true}, // a negative count
		{"+5," + f, true}, // a sign Lua's tonumber accepts
		{"5,+" + f, true}, //
		{"5, " + f, true}, // leading space: tonumber accepts it
		{"5," + f + " ", true},
		{"1.5," + f, true}, // not an integer
		{"5," + f + ".5", true},
		{"5,0x" + strconv.FormatInt(futureEnd, 16), true}, // hex: tonumber accepts it
		{"5,1e15", true},                 // exponent: tonumber accepts it
		{"1," + f + ",1," + f, true},     // two tiers in a Window's key
		{"1,99999999999999999999", true}, // past int64
		{"1,-99999999999999999999", true},
		{"99999999999999999999," + f, true},
		{"9007199254740992," + f, true}, // past MaxCount, which Lua reads rounded
		{"1,9007199254740993", true},
		{"1,-9007199254740992", true},
		// Values this store writes, or reads as it would write them.
		{"5," + f, false},
		{"05," + f, false},
		{"0," + f, false},
		{"9007199254740991," + f, false},
		{"5,-0", false}, // a window that has ended
	} {
		for _, alg := range []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow} {
			t.Run(fmt.Sprintf("%v/%q", alg, tc.val), func(t *testing.T) {
				prefix := newPrefix()
				s, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: prefix, Timeout: time.Second})
				require.NoError(t, err)
				w, err := s.Window(alg, time.Hour)
				require.NoError(t, err)
				letter := map[ratedb.Algorithm]string{ratedb.FixedWindow: "f", ratedb.PerKeyWindow: "p", ratedb.StaggeredWindow: "s"}[alg]
				key := prefix + "{k}:" + letter + "3600000"
				put := func() { require.NoError(t, raw.Set(ctx, key, tc.val, time.Hour).Err()) }
				stored := func() string { v, _ := raw.Get(ctx, key).Result(); return v }

				put()
				_, getErr := w.Get(ctx, "k")
				put()
				_, hitErr := w.Hit(ctx, "k", 1000, 1)
				require.Equal(t, tc.refused, getErr != nil, "Get: %v", getErr)
				require.Equal(t, tc.refused, hitErr != nil, "Hit: %v", hitErr)

				put()
				n, setErr := w.Set(ctx, "k", 7)
				if tc.refused {
					assert.ErrorIs(t, setErr, ratedb.ErrUnavailable, "Set on a value Get and Hit refuse must fail as they do")
					if setErr != nil {
						assert.Contains(t, setErr.Error(), "RATEDB_BADVALUE", "Set's error is Hit's")
						assert.Contains(t, hitErr.Error(), "RATEDB_BADVALUE")
					}
					assert.Equal(t, tc.val, stored(), "Set overwrote a value it refused")
					return
				}
				require.NoError(t, setErr)
				assert.Equal(t, int64(7), n)
				count, end, err := w.State(ctx, "k")
				require.NoError(t, err)
				assert.Equal(t, int64(7), count)
				if alg != ratedb.PerKeyWindow && tc.val != "5,-0" {
					assert.Equal(t, futureEnd, end.UnixMilli(), "Set keeps the open window's end")
				}
			})
		}
	}
}

// Set stores a window end capped at one scale after now, as every writing
// script does: after the clock stepped back, the window it sets ends within
// a scale.
func TestSetCapsTheStoredEnd(t *testing.T) {
	srv := startServer(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC).UnixMilli())
	s, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second,
		Clock: redisstore.LocalClock(func() time.Time { return time.UnixMilli(now.Load()) })})
	require.NoError(t, err)
	ctx := context.Background()
	w, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	_, err = w.Hit(ctx, "k", 10, 1) // window ends at 10:01:00
	require.NoError(t, err)
	now.Add(-(10 * time.Minute).Milliseconds()) // 09:50:30
	_, err = w.Set(ctx, "k", 3)                 // its window must end by 09:51:30
	require.NoError(t, err)
	now.Add((90 * time.Second).Milliseconds()) // 09:52:00
	n, err := w.Get(ctx, "k")
	require.NoError(t, err)
	assert.EqualValues(t, 0, n, "the window Set wrote has ended")
}
