package core

import (
	"context"
	"time"

	"github.com/ratedb/ratedb"
)

// Store makes limiters. *ratedb.DB satisfies it through DBStore; a
// network-backed store (redisstore) through its own small adapter.
//
// Implementations are safe for concurrent use.
type Store interface {
	// Window returns the limiter for single windows of alg and scale.
	Window(alg ratedb.Algorithm, scale time.Duration) (WindowLimiter, error)
	// Layered returns the limiter for the given tiers (limits included).
	Layered(alg ratedb.Algorithm, tiers ...ratedb.Tier) (LayeredLimiter, error)
}

// WindowLimiter is the part of a single-window limiter the core uses
// (*ratedb.Window has it). Implementations are safe for concurrent use.
type WindowLimiter interface {
	Hit(ctx context.Context, key string, limit, increment int64) (ratedb.Result, error)
	Get(ctx context.Context, key string) (int64, error)
	ExpiresAt(ctx context.Context, key string) (time.Time, error)
}

// LayeredLimiter is the part of a layered limiter the core uses
// (*ratedb.Layered has it). Implementations are safe for concurrent use.
type LayeredLimiter interface {
	Hit(ctx context.Context, key string, increment int64) (ratedb.Result, error)
	Get(ctx context.Context, key string) ([]int64, error)
	ExpiresAt(ctx context.Context, key string) ([]time.Time, error)
}

// DBStore adapts an embedded *ratedb.DB to Store. It is safe for concurrent
// use.
type DBStore struct{ DB *ratedb.DB }

// Window implements Store.
func (s DBStore) Window(alg ratedb.Algorithm, scale time.Duration) (WindowLimiter, error) {
	w, err := s.DB.Window(alg, scale)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Layered implements Store.
func (s DBStore) Layered(alg ratedb.Algorithm, tiers ...ratedb.Tier) (LayeredLimiter, error) {
	l, err := s.DB.Layered(alg, tiers...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

var (
	_ WindowLimiter  = (*ratedb.Window)(nil)
	_ LayeredLimiter = (*ratedb.Layered)(nil)
	_ WindowStater   = (*ratedb.Window)(nil)
	_ LayeredStater  = (*ratedb.Layered)(nil)
	_ Store          = DBStore{}
)
