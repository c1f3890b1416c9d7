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

// midnightMap is the MutexMap floor read while midnight UTC passes: from
// the 1001st count it reads, the clock is past midnight and every key
// counts 0 (its window ended), as the floor's own Count then answers.
type midnightMap struct {
	*mutexMap
	reads   atomic.Int64
	crossed *atomic.Bool
}

func (l *midnightMap) Count(key string) (int64, error) {
	if l.reads.Add(1) > 1000 {
		l.crossed.Store(true)
		return 0, nil
	}
	return l.mutexMap.Count(key)
}

// TestSteadyMidnightWhileCountingIsNoWrongCount: Steady checked for a run
// across midnight UTC before it read the counts, so midnight passing while
// it read them (a million keys take a while) failed the measurement as the
// limiter's wrong count ("key 1000 counts 0 hits") rather than as the
// window boundary it is.
func TestSteadyMidnightWhileCountingIsNoWrongCount(t *testing.T) {
	var crossed atomic.Bool
	day := time.Now().UTC().Truncate(DefaultWindow)
	steadyNow = func() time.Time {
		if crossed.Load() {
			return day.Add(DefaultWindow)
		}
		return day.Add(DefaultWindow - time.Minute)
	}
	t.Cleanup(func() { steadyNow = time.Now })
	f := Factory{Name: "MidnightMap", New: func(cfg Config) (Limiter, error) {
		m, err := newMutexMap(cfg)
		if err != nil {
			return nil, err
		}
		return &midnightMap{mutexMap: m.(*mutexMap), crossed: &crossed}, nil
	}}
	for _, p := range SteadyPatterns {
		crossed.Store(false)
		r, err := Steady(context.Background(), f, 2_000, p, 10*time.Millisecond, 30*time.Millisecond, false)
		if err == nil || !strings.Contains(err.Error(), "crossed midnight UTC") {
			t.Errorf("%s: midnight passed after %d keys' counts were read: Steady returned %v, want the crossing", p, r.Checked, err)
		}
	}
}
