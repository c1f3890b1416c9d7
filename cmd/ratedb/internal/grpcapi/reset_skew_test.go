package grpcapi_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// duration_until_reset is measured on the store's clock: a store whose
// clock runs ahead of or behind the server's (Redis's TIME on another host;
// the embedded DB's clock, which follows no wall-clock step) must not make a
// per-minute limit announce a reset hours away, or none. An allowed answer
// is bounded to [1 s, the window]; an OVER_LIMIT one is measured from the
// store's decision.
func TestDurationUntilResetFollowsTheStoreClock(t *testing.T) {
	for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
		f := startSkewed(t, nil, skew)
		allowed := statuses(f.call(t, "basic", 1, desc("one_per_minute", "n")))[0]
		assert.Equal(t, ok, allowed.Code, "skew %v", skew)
		assert.True(t, allowed.Reset >= 1 && allowed.Reset <= 60, "skew %v: an allowed reset of %d s in a minute window", skew, allowed.Reset)
		denied := statuses(f.call(t, "basic", 1, desc("one_per_minute", "n")))[0]
		assert.Equal(t, over, denied.Code, "skew %v", skew)
		assert.Equal(t, int64(30), denied.Reset, "skew %v: the store's window ends 30 s after its decision", skew)
	}
}
