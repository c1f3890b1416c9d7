package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counts records what the core reports.
type counts struct {
	mu                                    sync.Mutex
	allow, deny, opened, spikes, storeErr int
	decided                               int
}

func (c *counts) Checked(_, _ string, allowed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if allowed {
		c.allow++
	} else {
		c.deny++
	}
}
func (c *counts) WindowOpened(_, _ string)  { c.mu.Lock(); c.opened++; c.mu.Unlock() }
func (c *counts) BoundarySpike(_, _ string) { c.mu.Lock(); c.spikes++; c.mu.Unlock() }
func (c *counts) StoreError(_, _ string)    { c.mu.Lock(); c.storeErr++; c.mu.Unlock() }
func (c *counts) Decided(time.Duration) {
	c.mu.Lock()
	c.decided++
	c.mu.Unlock()
}

func TestObserverAndBoundarySpikes(t *testing.T) {
	obs := &counts{}
	c, _, now := newCore(t, core.Options{Observer: obs})
	l := window("r", 2, 10*time.Second)
	ctx := context.Background()
	hit := func() {
		_, err := c.Decide(ctx, core.Check{Limit: l, Key: "k", Cost: 1})
		require.NoError(t, err)
	}
	// Window 1 [0s, 10s): exhausted late (at 5s): no spike.
	now.Add(5000)
	hit()
	hit()
	hit() // denied: already counted as exhausted in this window
	assert.Equal(t, 0, obs.spikes)
	// Window 2 [10s, 20s): exhausted at 10.5s, within 10% of its start,
	// after window 1 was exhausted: a spike.
	now.Add(5500)
	hit()
	hit()
	hit()
	assert.Equal(t, 1, obs.spikes)
	// Window 3 [20s, 30s): exhausted at 25s: no spike.
	now.Add(14500)
	hit()
	hit()
	// Window 4 [30s, 40s): exhausted at 30.2s, after window 3: a spike.
	now.Add(5200)
	hit()
	hit()
	assert.Equal(t, 2, obs.spikes)
	// Window 6 [50s, 60s): exhausted at once, but window 5 was not
	// exhausted: no spike.
	now.Add(20000)
	hit()
	hit()
	assert.Equal(t, 2, obs.spikes)

	assert.Equal(t, 10, obs.allow)
	assert.Equal(t, 2, obs.deny)
	assert.Equal(t, 5, obs.opened, "one new window per window used")
	assert.Equal(t, 12, obs.decided)
	assert.Equal(t, 0, obs.storeErr)
}

// Boundary spikes at the edges of their definition: a window exhausted
// exactly 10% of its scale after it began is not a spike; a per-key window
// that began exactly 10% of the scale after the exhausted one ended is.
func TestBoundarySpikeEdges(t *testing.T) {
	t.Run("exhausted at 10% is late", func(t *testing.T) {
		obs := &counts{}
		c, _, now := newCore(t, core.Options{Observer: obs})
		l := window("r", 2, 10*time.Second)
		hit := func() {
			_, err := c.Decide(context.Background(), core.Check{Limit: l, Key: "k", Cost: 1})
			require.NoError(t, err)
		}
		hit()
		hit() // window [0s, 10s) exhausted
		now.Add(10_000)
		hit() // window [10s, 20s)
		now.Add(1_000)
		hit() // exhausted at 11 s: 10% after its start, not within it
		assert.Equal(t, 0, obs.spikes)
	})
	t.Run("per-key window 10% after the last", func(t *testing.T) {
		obs := &counts{}
		c, _, now := newCore(t, core.Options{Observer: obs})
		l := &core.Limit{Name: "p", Algorithm: ratedb.PerKeyWindow, Tiers: []ratedb.Tier{{Scale: 10 * time.Second, Limit: 1}}}
		hit := func() {
			_, err := c.Decide(context.Background(), core.Check{Limit: l, Key: "k", Cost: 1})
			require.NoError(t, err)
		}
		hit()           // window [0s, 10s) exhausted
		now.Add(11_000) // 1 s (10%) after it ended
		hit()           // window [11s, 21s) exhausted at once
		assert.Equal(t, 1, obs.spikes)
	})
}
