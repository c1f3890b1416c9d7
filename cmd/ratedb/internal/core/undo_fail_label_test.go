package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

// blindWindow's peeks see no window (as when another instance fills the
// key between the peek and the hit), and its undos fail.
type blindWindow struct{ core.WindowLimiter }

func (blindWindow) State(context.Context, string) (int64, time.Time, error) {
	return 0, time.Time{}, nil
}
func (blindWindow) Undo(context.Context, string, ratedb.Result, int64) error {
	return ratedb.ErrUnavailable
}

type blindStore struct{ core.DBStore }

func (s blindStore) Window(alg ratedb.Algorithm, scale time.Duration) (core.WindowLimiter, error) {
	w, err := s.DBStore.Window(alg, scale)
	return blindWindow{w}, err
}

// storeErrors records the rule of each StoreError.
type storeErrors struct {
	counts
	mu    sync.Mutex
	rules []string
}

func (s *storeErrors) StoreError(_, rule string) {
	s.mu.Lock()
	s.rules = append(s.rules, rule)
	s.mu.Unlock()
}

// README (metrics): the store error of several checks decided together is
// labelled with the first check's rule, the one a set whose undo failed
// after a limit denied it included.
func TestUndoFailureStoreErrorIsLabelledWithTheFirstRule(t *testing.T) {
	obs := &storeErrors{}
	_, db, now := newCore(t, core.Options{})
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	c := core.New(blindStore{core.DBStore{DB: db}}, core.Options{Clock: clock, Observer: obs})
	la, lb := window("ra", 5, time.Minute), window("rb", 1, time.Minute)
	ctx := context.Background()
	d, err := c.Decide(ctx, core.Check{Limit: lb, Key: "b", Cost: 1})
	require.NoError(t, err)
	require.True(t, d.Allowed, "b's only hit")

	d, err = c.Decide(ctx, core.Check{Limit: la, Key: "a", Cost: 1}, core.Check{Limit: lb, Key: "b", Cost: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed, "b is over its limit")
	assert.True(t, d.Results[0].Counted, "a's hit could not be undone")
	assert.Equal(t, []string{"ra"}, obs.rules)
}
