package redisstate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
)

// CheckNotClusterNode judges only a client of one server: a comma list's
// ClusterClient is what a Cluster needs, and its INFO, sent to any node,
// says cluster_enabled:1 (found by mutation testing: without the check of
// the client's type every Cluster deployment was refused at start as "one
// node of a Redis Cluster", and no test failed).
func TestClusterClientIsNotAClusterNode(t *testing.T) {
	addrs := proctest.StartCluster(t)
	c, err := redisstate.NewClient(strings.Join(addrs, ","))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, redisstate.CheckNotClusterNode(context.Background(), c))
}

// A server that answers INFO with an error (renamed, or refused to the
// user by an ACL) is not judged: CheckNotClusterNode reports nil, as its
// doc says, and the service starts (found by mutation testing: treating
// that answer as no answer refused the start with ErrUnavailable, and no
// test failed).
func TestInfoRefusedIsNotJudged(t *testing.T) {
	ctx := context.Background()
	addr, _ := proctest.StartRedis(t)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all", "-info").Err())
	c, err := redisstate.NewClient("redis://limited:pw@" + addr + "/0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var refused redis.Error
	require.ErrorAs(t, c.Info(ctx, "cluster").Err(), &refused, "INFO is refused to this user")
	require.NoError(t, redisstate.CheckNotClusterNode(ctx, c))
}
