package redisstate_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// instances returns n rule Managers, each with its own client of one real
// redis-server, as n service instances started with the same --redis.
func instances(t *testing.T, n int) []*rules.Manager {
	t.Helper()
	addr, _ := proctest.StartRedis(t)
	def := defaultRule(t)
	ms := make([]*rules.Manager, n)
	for i := range ms {
		c, err := redisstate.NewClient("redis://" + addr + "/0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		ms[i], err = rules.NewManager(redisstate.RulesStorage{C: c}, def)
		require.NoError(t, err)
	}
	return ms
}

func rule(t *testing.T, name, client string, limit int64, window string) *rules.Rule {
	t.Helper()
	r, err := rules.Build(name, rules.Spec{ClientID: client, Route: "*", Limit: &limit, Window: window}, false)
	require.NoError(t, err)
	return r
}

// names returns the names of m's current rules after a reload.
func names(t *testing.T, m *rules.Manager) []string {
	t.Helper()
	require.NoError(t, m.Reload())
	var out []string
	for _, r := range m.Current().Rules() {
		out = append(out, r.Name)
	}
	return out
}

// A rule stored through one instance survives a change made through
// another that has not reloaded since: the change applies to the rules in
// Redis, not to the other instance's copy.
func TestRuleChangesOfTwoInstancesBothStay(t *testing.T) {
	ms := instances(t, 2)
	a, b := ms[0], ms[1]
	created, err := a.Put(rule(t, "ban-mallory", "mallory", 1, "1h"))
	require.NoError(t, err)
	require.True(t, created)

	// b has not reloaded: its copy has no rules, but Redis has A's.
	require.Empty(t, b.Current().Rules())
	created, err = b.Put(rule(t, "vip", "vip", 1000, "1m"))
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, []string{"ban-mallory", "vip"}, names(t, a))
	assert.Equal(t, []string{"ban-mallory", "vip"}, names(t, b))

	// Through b, replacing A's rule: not created, and a windows change
	// starts a new generation counted from the stored rule's.
	before, ok := a.Current().Get("ban-mallory")
	require.True(t, ok)
	created, err = b.Put(rule(t, "ban-mallory", "mallory", 1, "2h"))
	require.NoError(t, err)
	assert.False(t, created, "ban-mallory is in Redis")
	require.NoError(t, a.Reload())
	got, ok := a.Current().Get("ban-mallory")
	require.True(t, ok)
	assert.Equal(t, before.Generation+1, got.Generation)

	// A rule deleted through a is gone for b, and b cannot delete it again.
	require.NoError(t, a.Delete("vip"))
	assert.ErrorIs(t, b.Delete("vip"), rules.ErrNotFound)
	assert.Equal(t, []string{"ban-mallory"}, names(t, b))
}

// Instances changing rules at the same time all keep their changes: every
// Put of 4 instances x 8 goroutines is in Redis afterwards.
func TestConcurrentRuleChangesAcrossInstancesAreAllKept(t *testing.T) {
	ms := instances(t, 4)
	const perInstance = 8
	var wg sync.WaitGroup
	errs := make(chan error, len(ms)*perInstance)
	for i, m := range ms {
		for j := range perInstance {
			r := rule(t, fmt.Sprintf("r-%d-%d", i, j), fmt.Sprintf("c%d-%d", i, j), 10, "1m")
			wg.Go(func() {
				_, err := m.Put(r)
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, m := range ms {
		assert.Len(t, names(t, m), len(ms)*perInstance)
	}
}

// defaultRule returns the default rule the tests' Managers start with.
func defaultRule(t *testing.T) *rules.Rule {
	t.Helper()
	limit := int64(100)
	def, err := rules.Build(rules.DefaultName, rules.Spec{ClientID: "*", Route: "*", Limit: &limit, Window: "1m"}, true)
	require.NoError(t, err)
	return def
}

// newClient returns a client of a real redis-server of its own, closed by
// the test's cleanup.
func newClient(t *testing.T) redis.UniversalClient {
	t.Helper()
	addr, _ := proctest.StartRedis(t)
	c, err := redisstate.NewClient("redis://" + addr + "/0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
