package redisstate_test

import (
	"net"
	"testing"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A --redis URL that does not parse is reported without repeating any part
// of it (it may hold a password), and refused rather than dialled (go-redis
// logs the address of a failed dial). A password holding '/', '?' or '#' (a
// base64 secret holds '/') ends the URL's authority early, and url.Parse
// then quotes the password as an "invalid port".
func TestBadRedisURLDoesNotLeakThePassword(t *testing.T) {
	for _, spec := range []string{
		"redis://:Sup3rSecret/xyz+w==@redis.internal:6379/0",
		"redis://user:Sup3rSecret#x@redis.internal:6379",
		"redis://user:Sup3rSecret?x@redis.internal:6379",
		"redis://a:1,redis://:Sup3rSecret/xyz@b:2",
		// A Cluster address without a scheme: go-redis logged it at
		// every failed dial.
		"user:Sup3rSecret@a:1,b:2",
		"a:1,:Sup3rSecret@b:2",
	} {
		_, err := redisstate.NewClient(spec)
		require.Error(t, err, spec)
		assert.NotContains(t, err.Error(), "Sup3rSecret", spec)
	}
}

// What a Cluster list's URLs say is used or refused, never silently
// dropped: a database other than 0 (a Cluster has none, and another
// deployment's rules and counts live in database 0), options, a unix
// socket, and URLs that disagree on credentials or TLS (the last one's
// applied to every node, so one rediss:// and one redis:// turned TLS off
// for all).
func TestClusterURLsAreUsedOrRefused(t *testing.T) {
	for _, spec := range []string{
		"redis://a:1/2,redis://b:2/2",
		"redis://a:1?dial_timeout=1s,b:2",
		"redis://a:1,redis://b:2?pool_size=1",
		"rediss://:Sup3rSecret@a:1,redis://:Sup3rSecret@b:2",
		"redis://:Sup3rSecret@a:1,redis://:Sup3rSecreu@b:2",
		"redis://u1:Sup3rSecret@a:1,redis://u2:Sup3rSecret@b:2",
		"unix:///tmp/redis.sock,a:1",
	} {
		c, err := redisstate.NewClient(spec)
		if assert.Error(t, err, spec) {
			assert.NotContains(t, err.Error(), "Sup3rSecret", spec)
		} else {
			_ = c.Close()
		}
	}
	for _, spec := range []string{
		"redis://:Sup3rSecret@a:1/0,redis://:Sup3rSecret@b:2",
		"rediss://:Sup3rSecret@a:1,b:2,c:3",
		"a:1,b:2",
	} {
		c, err := redisstate.NewClient(spec)
		require.NoError(t, err, spec)
		_ = c.Close()
	}
}

// go-redis verifies every Cluster node's TLS certificate against the one
// ServerName of ClusterOptions.TLSConfig (it shares that configuration
// among the nodes, discovered ones included). It is the host of the first
// URL of the list, as the README says (and as go-redis's ParseClusterURL
// picks it), not whichever URL came last.
func TestClusterTLSNameIsTheFirstURLsHost(t *testing.T) {
	c, err := redisstate.NewClient("rediss://first.example:6379,second.example:6380,rediss://third.example:6381")
	require.NoError(t, err)
	defer c.Close()
	cc, ok := c.(*redis.ClusterClient)
	require.True(t, ok, "a comma list is a Cluster client")
	tc := cc.Options().TLSConfig
	require.NotNil(t, tc, "rediss:// turns TLS on for every node")
	assert.Equal(t, "first.example", tc.ServerName)
	assert.Equal(t, []string{"first.example:6379", "second.example:6380", "third.example:6381"}, cc.Options().Addrs)
}

// NewClient contacts no Redis, except that a URL with min_idle_conns makes
// go-redis open those connections at once, as NewClient's doc says: the
// listener here sees one without any command sent.
func TestNewClientMinIdleConnsDials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c, err := redisstate.NewClient("redis://" + ln.Addr().String() + "/0?min_idle_conns=1")
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, ln.(*net.TCPListener).SetDeadline(time.Now().Add(10*time.Second)))
	conn, err := ln.Accept()
	require.NoError(t, err, "no connection opened for min_idle_conns")
	_ = conn.Close()
}

// A Cluster address without a scheme that holds '@' but no second ':' (a
// token or a user name before the host, "Sup3rSecret@host:port") splits as
// a host:port whose host holds the secret: it is refused, never dialled
// (go-redis logs the address of each failed dial) (found by mutation
// testing: without '@' among the refused characters it was accepted, and no
// test failed: the addresses tested had a "user:password@", which
// SplitHostPort refuses anyway).
func TestClusterAddressWithATokenBeforeTheHostIsRefused(t *testing.T) {
	for _, spec := range []string{"Sup3rSecret@a:1,b:2", "a:1,Sup3rSecret@b:2"} {
		c, err := redisstate.NewClient(spec)
		if assert.Error(t, err, spec) {
			assert.NotContains(t, err.Error(), "Sup3rSecret", spec)
		} else {
			_ = c.Close()
		}
	}
}
