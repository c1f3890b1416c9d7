package serve

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// /readyz needs no key, so however many requests ask, the store is checked
// at most once at a time and once a period: callers share a running check
// and reuse an outcome younger than the period.
func TestReadinessChecksOnceForManyCallers(t *testing.T) {
	var (
		checks  atomic.Int64
		release = make(chan struct{})
		started = make(chan struct{}, 1)
		fail    atomic.Bool
		clock   atomic.Int64 // ms since t0
	)
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0.Add(time.Duration(clock.Load()) * time.Millisecond) }
	r := newReadiness(func() error {
		checks.Add(1)
		started <- struct{}{}
		<-release
		if fail.Load() {
			return errors.New("snapshot failed")
		}
		return nil
	}, time.Second, now, slog.New(slog.DiscardHandler))

	// 50 callers while one check is blocked: one check, 50 answers.
	const callers = 50
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	wg.Go(func() { errs <- r.ready(context.Background()) })
	<-started
	for range callers - 1 {
		wg.Go(func() { errs <- r.ready(context.Background()) })
	}
	// A caller that gives up gets its context's error, the check goes on.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, r.ready(ctx), context.Canceled)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int64(1), checks.Load())

	// Within the period the outcome is reused; after it, checked again.
	clock.Add(999)
	require.NoError(t, r.ready(context.Background()))
	assert.Equal(t, int64(1), checks.Load())
	fail.Store(true)
	clock.Add(1)
	err := r.ready(context.Background())
	<-started
	assert.EqualError(t, err, "snapshot failed")
	assert.Equal(t, int64(2), checks.Load())
	assert.EqualError(t, r.ready(context.Background()), "snapshot failed", "a failure is reused for the period too")
	assert.Equal(t, int64(2), checks.Load())
}

// Anyone may ask /readyz, so a store that stays unusable is logged once,
// when it becomes so, and once more when it is usable again: not once a
// request or a check.
func TestReadinessLogsChangesOnly(t *testing.T) {
	var (
		fail  atomic.Bool
		clock atomic.Int64 // ms since t0
		buf   bytes.Buffer
	)
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0.Add(time.Duration(clock.Load()) * time.Millisecond) }
	r := newReadiness(func() error {
		if fail.Load() {
			return errors.New("snapshot failed")
		}
		return nil
	}, time.Second, now, slog.New(slog.NewTextHandler(&buf, nil)))
	lines := func() []string { return strings.Fields(strings.ReplaceAll(buf.String(), " ", "_")) }

	require.NoError(t, r.ready(context.Background()))
	assert.Empty(t, lines(), "ready from the start: nothing to log")
	fail.Store(true)
	for range 5 { // five checks, one a period, and requests within each
		clock.Add(1000)
		for range 3 {
			require.Error(t, r.ready(context.Background()))
		}
	}
	require.Len(t, lines(), 1)
	assert.Contains(t, lines()[0], "level=WARN")
	assert.Contains(t, lines()[0], "snapshot_failed")
	fail.Store(false)
	for range 3 {
		clock.Add(1000)
		require.NoError(t, r.ready(context.Background()))
	}
	require.Len(t, lines(), 2)
	assert.Contains(t, lines()[1], "level=INFO")
	assert.Contains(t, lines()[1], "usable_again")
}

// A store unusable from the first check is logged at once.
func TestReadinessLogsAFirstFailure(t *testing.T) {
	var buf bytes.Buffer
	r := newReadiness(func() error { return errors.New("no route to Redis") }, time.Second, time.Now, slog.New(slog.NewTextHandler(&buf, nil)))
	require.Error(t, r.ready(context.Background()))
	assert.Equal(t, 1, strings.Count(buf.String(), "level=WARN"))
}
