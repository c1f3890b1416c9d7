package tools_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/tools"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A window is live until its end, not at it: at its end the next check
// opens a new window (found by mutation testing: c.End >= now in Inspect
// listed a window as live at the instant it ended, and no test failed).
func TestGapWindowEndingNowIsExpired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	t0 := time.Now()
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 16,
		Clock: func() time.Time { return t0 }})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	_, err = w.Inc(context.Background(), "k", 1)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	ws, _, err := tools.Inspect(path, "", t0)
	require.NoError(t, err)
	require.Len(t, ws, 1)
	require.Len(t, ws[0].Ends, 1)
	end, err := time.Parse(time.RFC3339Nano, ws[0].Ends[0])
	require.NoError(t, err)
	require.True(t, end.After(t0), "the window ends after it was counted in")

	for _, tc := range []struct {
		name string
		now  time.Time
		live bool
	}{
		{"a millisecond before its end", end.Add(-time.Millisecond), true},
		{"at its end", end, false},
	} {
		ws, sum, err := tools.Inspect(path, "", tc.now)
		require.NoError(t, err, tc.name)
		require.Len(t, ws, 1, tc.name)
		assert.Equal(t, tc.live, ws[0].Live, tc.name)
		live, expired := 0, 1
		if tc.live {
			live, expired = 1, 0
		}
		assert.Equal(t, live, sum.Live, tc.name)
		assert.Equal(t, expired, sum.Expired, tc.name)
	}
}
