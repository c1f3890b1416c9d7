package redisstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/limitertest"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// prefixes makes every storage a test opens on a shared server its own.
var prefixes atomic.Int64

func newPrefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// backend runs the shared suite on Redis: every Open is a fresh prefix on
// the given server or cluster, and every handle a Store on its own client
// (as separate processes would have), with the suite's fake clock.
func backend(client func(t *testing.T) redis.UniversalClient, dedup time.Duration) limitertest.Backend {
	return limitertest.Backend{
		Open: func(t *testing.T, clock func() time.Time) func() limitertest.Store {
			prefix := newPrefix()
			return func() limitertest.Store {
				s, err := redisstore.New(client(t), &redisstore.Options{
					Prefix:      prefix,
					Clock:       redisstore.LocalClock(clock),
					Timeout:     5 * time.Second, // -race on a shared 2-core machine
					DedupWindow: dedup,
				})
				require.NoError(t, err)
				return suiteStore{s}
			}
		},
	}
}

// TestSuiteStandalone runs the shared behaviour suite against a standalone
// redis-server, with the default options (a Window counts with
// windowScript, a Layered limiter with countScript) and with DedupWindow
// (both count with countScript and a request id).
func TestSuiteStandalone(t *testing.T) {
	srv := startServer(t)
	for _, dedup := range []time.Duration{0, 5 * time.Second} {
		t.Run(fmt.Sprint("DedupWindow=", dedup), func(t *testing.T) {
			limitertest.Run(t, backend(func(t *testing.T) redis.UniversalClient { return srv.Client(t, nil) }, dedup))
		})
	}
}

// TestSuiteCluster runs the shared behaviour suite against a 3-master Redis
// Cluster.
func TestSuiteCluster(t *testing.T) {
	c := startCluster(t)
	limitertest.Run(t, backend(func(t *testing.T) redis.UniversalClient { return c.Client(t, nil) }, 0))
}

// suiteStore adapts a Store to limitertest.Store.
type suiteStore struct{ s *redisstore.Store }

func (s suiteStore) Window(alg ratedb.Algorithm, scale time.Duration) (ratedb.Limiter, error) {
	w, err := s.s.Window(alg, scale)
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (s suiteStore) Layered(alg ratedb.Algorithm, tiers ...ratedb.Tier) (limitertest.Layered, error) {
	l, err := s.s.Layered(alg, tiers...)
	if err != nil {
		return nil, err
	}
	return l, nil
}
