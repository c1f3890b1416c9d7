package ratedb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/require"
)

// After one janitor pass at a clock reading that ran ahead (an injected
// clock, e.g. time.Now across an NTP step, that is then corrected), windows
// opened afterwards by keys the glitch never touched must still leave memory
// at the first pass at or after their end (doc.go Caveats; README clock table:
// "keys the glitched calls did not touch are unaffected").
func TestJanitorAfterClockCorrection(t *testing.T) {
	for _, mode := range []string{"memory", "file"} {
		t.Run(mode, func(t *testing.T) {
			path := ""
			if mode == "file" {
				path = tempPath(t)
			}
			clock := newClock()
			db := openDB(t, path, testOptions(clock))
			w, err := db.Window(ratedb.FixedWindow, time.Second)
			require.NoError(t, err)
			ctx := context.Background()

			// One glitched pass: the clock reads a day ahead, then is corrected.
			clock.Advance(24 * time.Hour)
			_, err = db.Clean()
			require.NoError(t, err)
			clock.Advance(-24 * time.Hour)

			// Keys the glitch never saw: windows of one second.
			for i := 0; i < 100; i++ {
				r, err := w.Hit(ctx, fmt.Sprint("k", i), 10, 1)
				require.NoError(t, err)
				require.True(t, r.Allowed)
			}
			require.NoError(t, db.Snapshot())
			// Every one of them has ended a minute later.
			clock.Advance(time.Minute)
			removed, err := db.Clean()
			require.NoError(t, err)
			require.Equal(t, 100, removed, "expired windows removed by the pass")
			require.Zero(t, db.Stats().WindowsInMemory, "expired windows left in memory")
		})
	}
}
