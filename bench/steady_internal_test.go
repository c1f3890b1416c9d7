package bench

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// lossyMap is the MutexMap floor gone wrong: once the fill is done (Settle),
// it answers every 1000th hit "allowed" without counting it.
type lossyMap struct {
	*mutexMap
	armed atomic.Bool
	hits  atomic.Int64
}

func (l *lossyMap) Allow(key string) (bool, error) {
	if l.armed.Load() && l.hits.Add(1)%1000 == 0 {
		return true, nil
	}
	return l.mutexMap.Allow(key)
}

func (l *lossyMap) Settle() error { l.armed.Store(true); return nil }

// TestSteadyCatchesUncountedHits: with a quota no run reaches, every answer
// is "allowed" whether or not the hit was counted, so Steady, which checked
// only the answers, measured a limiter that skipped part of its work as a
// valid (and faster) one. It must now find the lost counts and fail.
func TestSteadyCatchesUncountedHits(t *testing.T) {
	lossy := Factory{Name: "LossyMap", New: func(cfg Config) (Limiter, error) {
		m, err := newMutexMap(cfg)
		if err != nil {
			return nil, err
		}
		return &lossyMap{mutexMap: m.(*mutexMap)}, nil
	}}
	for _, p := range SteadyPatterns {
		r, err := Steady(context.Background(), lossy, 2_000, p, 10*time.Millisecond, 30*time.Millisecond, false)
		if err == nil || !strings.Contains(err.Error(), "counts") {
			t.Errorf("%s: %d hits of which every 1000th was not counted: Steady returned %v (checked %d keys), want a wrong count", p, r.Hits, err, r.Checked)
		}
	}
}
