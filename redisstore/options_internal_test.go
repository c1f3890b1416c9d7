package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOptionsDefaults pins the defaults Options' field docs state to what
// New applies, for nil Options and for the zero Options (whose every field
// selects its default): Prefix "ratedb:" (every key a call sends starts
// with it), Timeout 50 ms, ServerClock (the scripts read TIME: no local
// reading is sent), no OnTime, and DedupWindow 0 (counting calls carry no
// request id and are sent at most once). No Redis is contacted.
func TestOptionsDefaults(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = c.Close() })
	assert.Equal(t, "ratedb:", DefaultPrefix)
	assert.Equal(t, 50*time.Millisecond, DefaultTimeout)
	for name, opts := range map[string]*Options{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			s, err := New(c, opts)
			require.NoError(t, err)
			assert.Equal(t, "ratedb:", s.prefix, "Prefix")
			assert.Equal(t, 50*time.Millisecond, s.timeout, "Timeout")
			assert.Nil(t, s.now, "Clock: ServerClock")
			assert.Nil(t, s.onTime, "OnTime")
			assert.Empty(t, s.dedupMS, "DedupWindow: off")

			w, err := s.Window(ratedb.FixedWindow, time.Minute)
			require.NoError(t, err)
			keys, args := w.HitArgs("k", 10, 1)
			require.Len(t, keys, 1, "no request id key without DedupWindow")
			assert.True(t, strings.HasPrefix(keys[0], "ratedb:"), "the counter key %q starts with the default prefix", keys[0])
			assert.Equal(t, "", args[0], "ServerClock sends no local time: the script reads TIME")
		})
	}
}
