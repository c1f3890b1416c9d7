package redisstate_test

import (
	"context"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rules value that is not a JSON list is refused, as "{}" or "x" are:
// JSON null (what a nil Go slice marshals to, and not what ratedb writes:
// an empty rule set is "[]") is no list either. Before, null read as "no
// rules": the next reload dropped every rule silently.
func TestNullRulesValueIsRefusedNotEmpty(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	c, err := redisstate.NewClient("redis://" + addr + "/0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	def := defaultRule(t)
	m, err := rules.NewManager(redisstate.RulesStorage{C: c}, def)
	require.NoError(t, err)
	_, err = m.Put(rule(t, "ban-mallory", "mallory", 1, "1h"))
	require.NoError(t, err)

	ctx := context.Background()
	require.NoError(t, c.Set(ctx, redisstate.RulesKey, "null", 0).Err())
	assert.Error(t, m.Reload(), "null is not a rules list")
	assert.Len(t, m.Current().Rules(), 1, "the rules are kept")
	_, err = rules.NewManager(redisstate.RulesStorage{C: c}, def)
	assert.Error(t, err, "a new instance does not start with no rules either")

	// An empty list is an empty rule set, and no key is none.
	require.NoError(t, c.Set(ctx, redisstate.RulesKey, "[]", 0).Err())
	require.NoError(t, m.Reload())
	assert.Empty(t, m.Current().Rules())
	require.NoError(t, c.Del(ctx, redisstate.RulesKey).Err())
	require.NoError(t, m.Reload())
	assert.Empty(t, m.Current().Rules())
}
