package redisstate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
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
