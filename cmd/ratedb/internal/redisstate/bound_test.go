package redisstate_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// The rules' value in Redis has the rules file's bound (rules.MaxFileSize):
// a change past it is refused with rules.ErrRulesFileFull (the API's 507)
// and writes nothing, and a larger value is refused without being read.
// Before, Update wrote any size and Load read any size (up to Redis's
// 512 MB), which the rules file never allowed.
func TestRedisRulesValueIsBounded(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	def := defaultRule(t)

	// One rule, to learn the size of its value.
	m, err := rules.NewManager(redisstate.RulesStorage{C: c}, def)
	require.NoError(t, err)
	_, err = m.Put(rule(t, "r1", "c1", 1, "1m"))
	require.NoError(t, err)
	one, err := c.Get(ctx, redisstate.RulesKey).Result()
	require.NoError(t, err)

	t.Run("a change past the bound", func(t *testing.T) {
		// A bound the value of one rule fits exactly, and two do not.
		s := redisstate.WithMaxSize(redisstate.RulesStorage{C: c}, len(one))
		m, err := rules.NewManager(s, def)
		require.NoError(t, err, "a value of exactly the bound is read")
		require.Len(t, m.Current().Rules(), 1)
		_, err = m.Put(rule(t, "r2", "c2", 1, "1m"))
		require.ErrorIs(t, err, rules.ErrRulesFileFull)
		assert.Contains(t, err.Error(), "256 MiB")
		assert.NotContains(t, err.Error(), "c2", "no client id in the error")
		after, err := c.Get(ctx, redisstate.RulesKey).Result()
		require.NoError(t, err)
		assert.Equal(t, one, after, "nothing was written")
		assert.Len(t, m.Current().Rules(), 1, "the rules served stay as they were")
	})

	t.Run("a value past the bound", func(t *testing.T) {
		s := redisstate.WithMaxSize(redisstate.RulesStorage{C: c}, len(one)-1)
		_, err := s.Load()
		require.ErrorIs(t, err, redisstate.ErrRulesTooLarge)
		_, err = rules.NewManager(s, def)
		require.ErrorIs(t, err, redisstate.ErrRulesTooLarge, "an instance does not start with it")
		require.NoError(t, m.Reload(), "under the real bound it is read")

		// The real bound, without a test's: a value of MaxFileSize+1 bytes,
		// made inside Redis (SETRANGE pads with zeros), is refused
		// without being sent.
		require.NoError(t, c.SetRange(ctx, redisstate.RulesKey, rules.MaxFileSize, "x").Err())
		t.Cleanup(func() { _ = c.Del(context.Background(), redisstate.RulesKey).Err() })
		_, err = redisstate.RulesStorage{C: c}.Load()
		require.ErrorIs(t, err, redisstate.ErrRulesTooLarge)
		assert.Equal(t, "rules: ratedb:rules in Redis holds 268435457 bytes: redisstate: the rules in Redis are larger than their bound of 256 MiB (268435456 bytes)", err.Error())
		err = m.Reload()
		require.ErrorIs(t, err, redisstate.ErrRulesTooLarge)
		assert.Len(t, m.Current().Rules(), 1, "a running instance keeps its rules")
		_, err = m.Put(rule(t, "r3", "c3", 1, "1m"))
		require.ErrorIs(t, err, redisstate.ErrRulesTooLarge, "nor is it replaced")
		n, err := c.StrLen(ctx, redisstate.RulesKey).Result()
		require.NoError(t, err)
		assert.Equal(t, int64(rules.MaxFileSize+1), n)
	})
}
