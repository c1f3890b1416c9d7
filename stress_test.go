package ratedb_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/require"
)

// hitLog records, per key and window end, the counts seen by allowed hits.
type hitLog struct {
	mu   sync.Mutex
	seen map[string][]int64
}

func (l *hitLog) add(key string, r ratedb.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := fmt.Sprint(key, "@", r.ResetAt.UnixMilli())
	l.seen[k] = append(l.seen[k], r.Count)
}

// TestNoDoubleCountUnderJanitorAndSnapshots is the stress shape of bug 0 of
// issue 9: the real clock, the janitor and snapshots every millisecond, a
// cache of two windows for five keys and windows of 5 ms, so that windows
// end, are written, dropped, reloaded and cleaned while hits run. Per key
// and window, the allowed hits must never exceed the limit and must see
// strictly increasing counts (two counters alive for one window would show
// as a repeated count).
func TestNoDoubleCountUnderJanitorAndSnapshots(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	cases := []struct {
		name  string
		alg   ratedb.Algorithm
		clock func() time.Time
		hot   int64
	}{
		{"fixed", ratedb.FixedWindow, nil, 2},
		{"staggered", ratedb.StaggeredWindow, nil, 2},
		{"fixed/time.Now", ratedb.FixedWindow, time.Now, 2},
		{"staggered/default-hot", ratedb.StaggeredWindow, nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t, tempPath(t), &ratedb.Options{
				Clock: tc.clock, SnapshotPeriod: time.Millisecond, CleanPeriod: time.Millisecond, MaxHotKeys: tc.hot,
			})
			w, err := db.Window(tc.alg, 5*time.Millisecond)
			require.NoError(t, err)
			const limit = 4
			log := &hitLog{seen: map[string][]int64{}}
			deadline := time.Now().Add(250 * time.Millisecond)
			var wg sync.WaitGroup
			errs := make(chan error, 6)
			for g := 0; g < 6; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := g; time.Now().Before(deadline); i++ {
						key := fmt.Sprint("k", i%5)
						r, err := w.Hit(context.Background(), key, limit, 1)
						if err != nil {
							errs <- err
							return
						}
						if r.Allowed {
							log.add(key, r)
						}
					}
				}(g)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for k, counts := range log.seen {
				require.LessOrEqual(t, len(counts), limit, "window %s admitted %d hits: counts %v", k, len(counts), counts)
				// Counts are recorded after the hit returns, so two hits of
				// one window may be logged out of order: sort-free check
				// that every count from 1 to len appears exactly once.
				got := map[int64]int{}
				for _, c := range counts {
					got[c]++
				}
				for c := int64(1); c <= int64(len(counts)); c++ {
					require.Equal(t, 1, got[c], "window %s: counts %v", k, counts)
				}
			}
		})
	}
}
