package redisstate_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// Reading the rules is a read-only script (EVALSHA_RO), which a CLIENT
// PAUSE WRITE (as a failover makes) does not hold up, and it tells no key
// from an empty value. Run by EVALSHA, the pause held the script whatever
// it did: the periodic reload then waited out the pause, and so did a
// shutdown waiting for it.
func TestRulesLoadDuringAWritePause(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	s := redisstate.RulesStorage{C: c}

	rs, err := s.Load()
	require.NoError(t, err, "no key: no rules")
	assert.Empty(t, rs)
	require.NoError(t, c.Set(ctx, redisstate.RulesKey, "", 0).Err())
	_, err = s.Load()
	require.Error(t, err, "an empty value is no rules list")
	assert.Contains(t, err.Error(), "is not a rules list")

	def := defaultRule(t)
	require.NoError(t, c.Del(ctx, redisstate.RulesKey).Err())
	m, err := rules.NewManager(s, def)
	require.NoError(t, err)
	_, err = m.Put(rule(t, "r1", "c1", 1, "1m"))
	require.NoError(t, err)

	// A pause far longer than a call's bound (CallTimeout, 1 s here).
	require.NoError(t, c.Do(ctx, "CLIENT", "PAUSE", 60_000, "WRITE").Err())
	t.Cleanup(func() { _ = c.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
	rs, err = s.Load()
	require.NoError(t, err, "a read during a write pause")
	require.Len(t, rs, 1)
	assert.Equal(t, "r1", rs[0].Name)
}
