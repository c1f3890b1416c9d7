package redisstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
)

// A rules read waits for a busy Redis up to RulesStorage.Timeout (the
// service gives ten times --redis-timeout), not a fixed second: a deployment
// whose Redis answers slowly raised --redis-timeout, and its rule reads and
// changes must not fail where its checks succeed. Here Redis holds commands
// for 1.5 s (CLIENT PAUSE).
func TestRulesTimeoutFollowsTheStoresTimeout(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	pauser, err := redisstate.NewClient("redis://" + addr + "/0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = pauser.Close() })
	// CLIENT PAUSE holds every other client's commands for 1.5 s; it
	// returns at once, so the Load below is sent while Redis holds it.
	pause := func() { require.NoError(t, pauser.ClientPause(context.Background(), 1500*time.Millisecond).Err()) }
	c, err := redisstate.NewClient("redis://" + addr + "/0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	_, err = redisstate.RulesStorage{C: c}.Load() // connects before any pause
	require.NoError(t, err)
	pause()
	_, err = redisstate.RulesStorage{C: c}.Load()
	assert.Error(t, err, "the default bound, 1 s, is shorter than the pause")
	pause()
	_, err = redisstate.RulesStorage{C: c, Timeout: 5 * time.Second}.Load()
	assert.NoError(t, err, "a bound of 5 s waits the pause out")
}
