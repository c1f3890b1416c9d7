package redisstore_test

import (
	"testing"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

// New documents an error wrapping ErrInvalidArgument for a nil client. A
// nil *redis.Client or *redis.ClusterClient in the interface is a nil
// client too (an unset field of the caller's config): it must be refused
// with that error, not panic in New or on the first call.
func TestNewRefusesATypedNilClient(t *testing.T) {
	var c *redis.Client
	var cc *redis.ClusterClient
	for name, client := range map[string]redis.UniversalClient{"*redis.Client": c, "*redis.ClusterClient": cc} {
		var err error
		assert.NotPanics(t, func() { _, err = redisstore.New(client, nil) }, name)
		assert.ErrorIs(t, err, ratedb.ErrInvalidArgument, name)
	}
}
