package ratedb_test

import (
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/limitertest"
)

// TestLimiterSuite runs the behaviour suite every backend shares (redisstore
// runs it against Redis) against the embedded DB, in memory and with a file.
func TestLimiterSuite(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		limitertest.Run(t, limitertest.Backend{
			Open: func(t *testing.T, clock func() time.Time) func() limitertest.Store {
				if path != "" {
					path = tempPath(t)
				}
				db := openDB(t, path, &ratedb.Options{Clock: clock, SnapshotPeriod: -1, CleanPeriod: -1})
				return func() limitertest.Store { return suiteDB{db} } // one DB: every handle shares it
			},
		})
	})
}

// suiteDB adapts a DB to limitertest.Store.
type suiteDB struct{ db *ratedb.DB }

func (s suiteDB) Window(alg ratedb.Algorithm, scale time.Duration) (ratedb.Limiter, error) {
	w, err := s.db.Window(alg, scale)
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (s suiteDB) Layered(alg ratedb.Algorithm, tiers ...ratedb.Tier) (limitertest.Layered, error) {
	l, err := s.db.Layered(alg, tiers...)
	if err != nil {
		return nil, err
	}
	return l, nil
}
