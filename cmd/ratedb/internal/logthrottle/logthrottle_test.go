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
