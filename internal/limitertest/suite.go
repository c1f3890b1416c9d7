// Package limitertest is the behaviour suite every ratedb backend must pass:
// the table tests of the Limiter and Layered semantics (window arithmetic
// of each algorithm, all-or-nothing tiers, denied hits counting nothing,
// Result fields, argument validation, separation of counters, refunds and undos,
// the clock stepping back (windows cut to one scale after now),
// exactness under concurrency, of hits and of refunds racing them). The embedded DB runs it from the root package's tests,
// redisstore against a real Redis server and a real Redis Cluster, so that
// both backends are held to the same answers.
//
// Time is a fake clock the suite controls, passed to the backend (for
// redisstore, LocalClock).
package limitertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
)

// Store is what the suite needs of a backend: ratedb.DB's or
// redisstore.Store's Window and Layered.
type Store interface {
	Window(alg ratedb.Algorithm, scale time.Duration) (ratedb.Limiter, error)
	Layered(alg ratedb.Algorithm, tiers ...ratedb.Tier) (Layered, error)
}

// Layered is the method set of *ratedb.Layered that every backend's Layered
// limiter has.
type Layered interface {
	Hit(ctx context.Context, key string, increment int64) (ratedb.Result, error)
	Inc(ctx context.Context, key string, increment int64) ([]int64, error)
	Get(ctx context.Context, key string) ([]int64, error)
	Refund(ctx context.Context, key string, amount int64) ([]int64, error)
	Undo(ctx context.Context, key string, r ratedb.Result, increment int64) error
	ExpiresAt(ctx context.Context, key string) ([]time.Time, error)
	Reset(ctx context.Context, key string) error
	Tiers() []ratedb.Tier
}

// Backend is a backend under test.
type Backend struct {
	// Open creates fresh, empty storage whose time is read from clock, and
	// returns a function that opens a new handle onto it: handles stand for
	// separate processes sharing the storage (for Redis, each has its own
	// client). Open stops whatever it starts in t.Cleanup.
	Open func(t *testing.T, clock func() time.Time) (handle func() Store)
}

// Run runs the whole suite against b.
func Run(t *testing.T, b Backend) {
	t.Run("Algorithms", func(t *testing.T) { testAlgorithms(t, b) })
	t.Run("Calendar", func(t *testing.T) { testCalendar(t, b) })
	t.Run("Staggered", func(t *testing.T) { testStaggered(t, b) })
	t.Run("Separation", func(t *testing.T) { testSeparation(t, b) })
	t.Run("BadInput", func(t *testing.T) { testBadInput(t, b) })
	t.Run("ClockRange", func(t *testing.T) { testClockRange(t, b) })
	t.Run("ClockStepBack", func(t *testing.T) { testClockStepBack(t, b) })
	t.Run("LayeredAllOrNothing", func(t *testing.T) { testLayeredAllOrNothing(t, b) })
	t.Run("LayeredRetryAfter", func(t *testing.T) { testLayeredRetryAfter(t, b) })
	t.Run("ConcurrentExactness", func(t *testing.T) { testConcurrentExactness(t, b) })
	t.Run("Refund", func(t *testing.T) { testRefund(t, b) })
	t.Run("ConcurrentRefunds", func(t *testing.T) { testConcurrentRefunds(t, b) })
	t.Run("LayeredRefund", func(t *testing.T) { testLayeredRefund(t, b) })
	t.Run("LayeredConcurrentRefunds", func(t *testing.T) { testLayeredConcurrentRefunds(t, b) })
	t.Run("Undo", func(t *testing.T) { testUndo(t, b) })
	t.Run("LayeredUndo", func(t *testing.T) { testLayeredUndo(t, b) })
	t.Run("ConcurrentUndo", func(t *testing.T) { testConcurrentUndo(t, b) })
}

// Epoch is a round instant (a multiple of a day since the Unix epoch), so
// that FixedWindow boundaries in tests are easy to read. Fake clocks start
// there.
var Epoch = time.UnixMilli(1_767_225_600_000) // 2026-01-01T00:00:00Z

// Clock is a settable fake clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at Epoch.
func NewClock() *Clock { return &Clock{t: Epoch} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t (forwards or backwards).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// open opens fresh storage at the clock's time and returns one handle.
func open(t *testing.T, b Backend, c *Clock) Store {
	t.Helper()
	return b.Open(t, c.Now)()
}

var ctx = context.Background()

// algorithms lists every algorithm, for tests that run once per algorithm.
var algorithms = []ratedb.Algorithm{ratedb.FixedWindow, ratedb.PerKeyWindow, ratedb.StaggeredWindow}
