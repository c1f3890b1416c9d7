package redisstate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CheckNotClusterNode judges only a client of one server: a comma list's
// ClusterClient is what a Cluster needs, and its INFO, sent to any node,
// says cluster_enabled:1 (found by mutation testing: without the check of
// the client's type every Cluster deployment was refused at start as "one
// node of a Redis Cluster", and no test failed).
func TestGapClusterClientIsNotAClusterNode(t *testing.T) {
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
func TestGapInfoRefusedIsNotJudged(t *testing.T) {
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

// A Cluster address without a scheme that holds '@' but no second ':' (a
// token or a user name before the host, "Sup3rSecret@host:port") splits as
// a host:port whose host holds the secret: it is refused, never dialled
// (go-redis logs the address of each failed dial) (found by mutation
// testing: without '@' among the refused characters it was accepted, and no
// test failed: the addresses tested had a "user:password@", which
// SplitHostPort refuses anyway).
func TestGapClusterAddressWithATokenBeforeTheHostIsRefused(t *testing.T) {
	for _, spec := range []string{"Sup3rSecret@a:1,b:2", "a:1,Sup3rSecret@b:2"} {
		c, err := redisstate.NewClient(spec)
		if assert.Error(t, err, spec) {
			assert.NotContains(t, err.Error(), "Sup3rSecret", spec)
		} else {
			_ = c.Close()
		}
	}
}
