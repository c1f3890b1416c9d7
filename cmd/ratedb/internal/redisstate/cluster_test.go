package redisstate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rule change while the slot of ratedb:rules migrates between Cluster
// nodes (its key already moved, the slot not yet handed over, as in
// redis-cli --cluster reshard) either is stored or fails with
// ErrUnavailable: never reported stored when it was not. go-redis's
// ClusterClient.Watch sends WATCH to the old owner, which answers ASK;
// WATCH on the new owner without ASKING answers MOVED back; once
// MaxRedirects is spent, Watch returned nil without running the
// transaction. The Manager then served a nil rule set, and the service
// crashed at its next rules reload.
func TestRuleChangeDuringSlotMigration(t *testing.T) {
	ctx := context.Background()
	addrs := proctest.StartCluster(t)
	c, err := redisstate.NewClient(strings.Join(addrs, ","))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	def := defaultRule(t)
	m, err := rules.NewManager(redisstate.RulesStorage{C: c}, def)
	require.NoError(t, err)
	_, err = m.Put(rule(t, "first", "alice", 1, "1m"))
	require.NoError(t, err)

	// Move ratedb:rules to another node, leaving the slot migrating.
	node := func(a string) *redis.Client {
		cl := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	slot := int(c.ClusterKeySlot(ctx, redisstate.RulesKey).Val())
	var src, dst string
	for _, a := range addrs {
		if node(a).Exists(ctx, redisstate.RulesKey).Val() == 1 {
			src = a
		} else if dst == "" {
			dst = a
		}
	}
	require.NotEmpty(t, src)
	srcID := node(src).Do(ctx, "CLUSTER", "MYID").Val()
	dstID := node(dst).Do(ctx, "CLUSTER", "MYID").Val()
	require.NoError(t, node(dst).Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	require.NoError(t, node(src).Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	_, port, _ := strings.Cut(dst, ":")
	require.NoError(t, node(src).Do(ctx, "MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS", redisstate.RulesKey).Err())

	created, err := m.Put(rule(t, "second", "bob", 1, "1m"))
	if err != nil {
		assert.ErrorIs(t, err, ratedb.ErrUnavailable)
	} else {
		assert.True(t, created)
		v, gerr := c.Get(ctx, redisstate.RulesKey).Result()
		require.NoError(t, gerr)
		assert.Contains(t, v, `"second"`, "reported stored, but not in Redis")
	}
	require.NotNil(t, m.Current(), "the Manager serves no rule set")
	assert.NotPanics(t, func() { _ = m.Reload() })

	// Once the slot has moved, changes work again.
	for _, a := range addrs {
		require.NoError(t, node(a).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	}
	_, err = m.Put(rule(t, "third", "carol", 1, "1m"))
	require.NoError(t, err)
	var got []string
	for _, r := range m.Current().Rules() {
		got = append(got, r.Name)
	}
	assert.Contains(t, got, "third")
	assert.Contains(t, got, "first")
}
