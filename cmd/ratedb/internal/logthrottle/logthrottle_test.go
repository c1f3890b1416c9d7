package logthrottle_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/logthrottle"
)

// One line a period gets through; the next one let through reports how
// many were held back, including those of concurrent callers.
func TestThrottle(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	th := &logthrottle.Throttle{Period: time.Second, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	ok, held := th.Allow()
	assert.True(t, ok)
	assert.Zero(t, held)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			ok, _ := th.Allow()
			assert.False(t, ok, "within the period")
		})
	}
	wg.Wait()
	mu.Lock()
	now = now.Add(999 * time.Millisecond)
	mu.Unlock()
	ok, _ = th.Allow()
	assert.False(t, ok)
	mu.Lock()
	now = now.Add(time.Millisecond)
	mu.Unlock()
	ok, held = th.Allow()
	assert.True(t, ok, "a period after the last line")
	assert.Equal(t, int64(51), held)
	ok, held = th.Allow()
	assert.False(t, ok)
	assert.Zero(t, held)
}

// The zero Throttle lets the first line through.
func TestZeroThrottle(t *testing.T) {
	var th logthrottle.Throttle
	ok, _ := th.Allow()
	assert.True(t, ok)
	ok, _ = th.Allow()
	assert.False(t, ok)
}

// A line let through reports only the lines held back since the previous
// one let through, not those an earlier line already reported (found by
// mutation testing: not resetting the held count made every later line
// report the total since start, and no test failed).
func TestHeldCountStartsAgainAfterEachLine(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	th := &logthrottle.Throttle{Period: time.Second, Now: func() time.Time { return now }}
	ok, _ := th.Allow()
	assert.True(t, ok)
	for _, tc := range []struct {
		name string
		held int
	}{
		{"first period", 3},
		{"second period", 2},
		{"third period, nothing held", 0},
	} {
		for range tc.held {
			ok, _ := th.Allow()
			assert.False(t, ok, tc.name)
		}
		now = now.Add(time.Second)
		ok, held := th.Allow()
		assert.True(t, ok, tc.name)
		assert.Equal(t, int64(tc.held), held, tc.name)
	}
}
