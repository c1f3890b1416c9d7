package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
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

// endedStore's calls fail as redisstore's do once their caller's context
// has ended (or its deadline passed) while Redis is healthy: an error
// wrapping both ratedb.ErrUnavailable and the context's error.
type endedStore struct{}

func (endedStore) Window(ratedb.Algorithm, time.Duration) (core.WindowLimiter, error) {
	return endedWindow{}, nil
}

func (endedStore) Layered(ratedb.Algorithm, ...ratedb.Tier) (core.LayeredLimiter, error) {
	return nil, errors.New("unused")
}

type endedWindow struct{}

func ended(ctx context.Context) error {
	err := core.CallerGaveUp(ctx)
	if err == nil {
		err = errors.New("test: the caller was expected to have given up")
	}
	return fmt.Errorf("%w: redisstore: %w", ratedb.ErrUnavailable, err)
}

func (endedWindow) Hit(ctx context.Context, _ string, _, _ int64) (ratedb.Result, error) {
	return ratedb.Result{}, ended(ctx)
}
func (endedWindow) Get(ctx context.Context, _ string) (int64, error) { return 0, ended(ctx) }
func (endedWindow) ExpiresAt(ctx context.Context, _ string) (time.Time, error) {
	return time.Time{}, ended(ctx)
}

// pastDeadline is a context whose deadline has passed but which does not
// say so yet (its timer has not fired): a network store's socket timeout,
// set from the deadline, can fail the call in that gap.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }

// A store call that failed because its caller gave up (a client that hung
// up, Envoy's rate-limit timeout) is no store failure even with FailOpen:
// Decide returns the error (the adapters answer it as the caller's, or not
// at all) instead of failing the set open, which the HTTP API logged as
// "check failed open: the store failed", and reports no store error.
func TestCallerThatGaveUpIsNotFailedOpen(t *testing.T) {
	l := window("r", 10, time.Minute)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, ctx := range map[string]context.Context{
		"cancelled":     cancelled,
		"past deadline": pastDeadline{context.Background()},
	} {
		obs := &counts{}
		c := core.New(endedStore{}, core.Options{FailOpen: true, Observer: obs})
		for _, set := range [][]core.Check{
			{{Limit: l, Key: "k", Cost: 1}},
			{{Limit: l, Key: "a", Cost: 1}, {Limit: l, Key: "b", Cost: 1}},
		} {
			d, err := c.Decide(ctx, set...)
			require.ErrorIs(t, err, ratedb.ErrUnavailable, "%s, %d checks", name, len(set))
			assert.False(t, d.FailedOpen, "%s, %d checks: failed open for a caller that gave up", name, len(set))
			assert.False(t, d.Allowed, "%s, %d checks", name, len(set))
		}
		assert.Equal(t, 0, obs.storeErr, "%s: a caller that gave up was counted as a store error", name)
		assert.Equal(t, 2, obs.decided, "%s", name)
	}
}

func TestCallerGaveUp(t *testing.T) {
	assert.NoError(t, core.CallerGaveUp(context.Background()))
	future, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	assert.NoError(t, core.CallerGaveUp(future))
	cancel()
	assert.ErrorIs(t, core.CallerGaveUp(future), context.Canceled)
	assert.ErrorIs(t, core.CallerGaveUp(pastDeadline{context.Background()}), context.DeadlineExceeded)
}
