package redisstate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// EvictingNodes reads maxmemory-policy from every node of a Cluster the
// client knows, not only from the one a keyless command reaches: one node
// among three that evicts is found, by its address, and a Cluster whose
// nodes all use noeviction has none.
func TestEvictingNodesReadsEveryClusterNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs := proctest.StartCluster(t)
	c, err := redisstate.NewClient(strings.Join(addrs, ","))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	evicting, err := redisstate.EvictingNodes(ctx, c)
	require.NoError(t, err)
	assert.Empty(t, evicting, "noeviction is Redis's default")

	node := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer node.Close()
	require.NoError(t, node.ConfigSet(ctx, "maxmemory-policy", "allkeys-lfu").Err())
	evicting, err = redisstate.EvictingNodes(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, []redisstate.NodePolicy{{Addr: addrs[1], Policy: "allkeys-lfu"}}, evicting)
}

// A server whose policy cannot be read (here, one that does not answer
// within the context) is reported as an error, never as a policy.
func TestEvictingNodesReportsWhatItCannotRead(t *testing.T) {
	addr := proctest.StartStoppedRedis(t)
	c, err := redisstate.NewClient("redis://" + addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	evicting, err := redisstate.EvictingNodes(ctx, c)
	assert.Empty(t, evicting)
	require.Error(t, err)
	assert.Contains(t, err.Error(), addr)
}
