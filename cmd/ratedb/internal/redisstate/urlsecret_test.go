package redisstate_test

import (
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
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
