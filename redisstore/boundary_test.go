package redisstore_test

import (
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// overAdmitted hits one key of a FixedWindow of 5 ms with limit 3 from 8
// goroutines for about half a second, on the real clock, and returns how
// many windows (known by their end) allowed more than the limit, and how
// many windows it saw.
func overAdmitted(t *testing.T, s *redisstore.Store) (over, windows int) {
	t.Helper()
	const limit = 3
	w, err := s.Window(ratedb.FixedWindow, 5*time.Millisecond)
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		allowed = map[int64]int{}
		wg      sync.WaitGroup
	)
	stop := time.Now().Add(500 * time.Millisecond)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				r, err := w.Hit(ctx, "k", limit, 1)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				n := allowed[r.ResetAt.UnixMilli()] // a denied hit adds its window too
				if r.Allowed {
					n++
				}
				allowed[r.ResetAt.UnixMilli()] = n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, n := range allowed {
		if n > limit {
			over++
		}
	}
	return over, len(allowed)
}

// With ServerClock, concurrent calls at window boundaries never allow more
// than the limit in a window: the time is read inside the script, which
// Redis runs one at a time. (With LocalClock on the real clock, a call that
// read the time before a boundary and runs after the next window opened cuts
// that window short, as a clock stepped back would: the README's Clock
// section. The test logs how many windows that over-admitted, for
// comparison; it asserts nothing about them.)
func TestServerClockExactAtBoundaries(t *testing.T) {
	srv := startServer(t)
	s, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Timeout: 5 * time.Second, Prefix: "server:"})
	require.NoError(t, err)
	over, windows := overAdmitted(t, s)
	assert.GreaterOrEqual(t, windows, 10, "the run crossed many boundaries (100 in half a second; fewer on a slow machine)")
	assert.Zero(t, over, "windows over the limit with ServerClock, of %d", windows)

	local, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Timeout: 5 * time.Second, Prefix: "local:",
		Clock: redisstore.LocalClock(time.Now)})
	require.NoError(t, err)
	over, windows = overAdmitted(t, local)
	t.Logf("LocalClock(time.Now): %d of %d windows allowed more than the limit", over, windows)
}
