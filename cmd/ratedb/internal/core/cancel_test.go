package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A caller that gave up (a client that hung up, Envoy's rate-limit timeout)
// is not a store failure: the embedded file did not fail, yet
// ratedb_store_errors_total ("check requests whose store failed: 503, or
// allowed with --fail-open") grows by one per cancelled request.
func TestCallerCancellationIsNotAStoreError(t *testing.T) {
	obs := &counts{}
	c, _, _ := newCore(t, core.Options{Observer: obs})
	l := window("r", 10, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
	require.ErrorIs(t, err, context.Canceled)
	_, err = c.Decide(ctx, core.Check{Limit: l, Key: "a", Cost: 1}, core.Check{Limit: l, Key: "b", Cost: 1})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 0, obs.storeErr, "a cancelled caller was counted as a store error")
}
