package limitertest

import (
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testCalendar pins what "aligned to the Unix epoch" means on a calendar,
// as the README's Algorithms section says it: FixedWindow boundaries are
// multiples of the scale since 1970-01-01T00:00Z whatever the clock's time
// zone, so a day resets at 00:00 UTC, a week on Thursdays (the epoch was a
// Thursday), 30 days is no month, and a scale that does not divide an hour
// does not restart on the hour. A window is half-open: at the instant it
// ends, the next one has begun.
func testCalendar(t *testing.T, b Backend) {
	// Epoch (2026-01-01, a Thursday) + 13:00:07, read in a zone 5h30 east
	// of UTC: a local day would end at 18:30 UTC.
	at := Epoch.Add(13*time.Hour + 7*time.Second).In(time.FixedZone("UTC+5:30", 5*3600+1800))
	tests := []struct {
		name  string
		scale time.Duration
		end   string // ResetAt of a hit at `at`, in UTC
	}{
		{"a minute ends at the top of the minute", time.Minute, "2026-01-01T13:01:00Z"},
		{"7m windows are multiples of 7 minutes since 1970, not of the hour", 7 * time.Minute, "2026-01-01T13:04:00Z"},
		{"a day ends at 00:00 UTC, not at local midnight", 24 * time.Hour, "2026-01-02T00:00:00Z"},
		{"a week ends on a Thursday at 00:00 UTC", 7 * 24 * time.Hour, "2026-01-08T00:00:00Z"},
		{"30 days are counted from 1970, not a calendar month", 30 * 24 * time.Hour, "2026-01-07T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock()
			c.Set(at)
			w, err := open(t, b, c).Window(ratedb.FixedWindow, tt.scale)
			require.NoError(t, err)
			r, err := w.Hit(ctx, "k", 1, 1)
			require.NoError(t, err)
			require.True(t, r.Allowed)
			assert.Equal(t, tt.end, r.ResetAt.UTC().Format(time.RFC3339))

			// One millisecond before the end the window is still this one;
			// at the end itself a new one has begun.
			c.Set(r.ResetAt.Add(-time.Millisecond))
			d, err := w.Hit(ctx, "k", 1, 1)
			require.NoError(t, err)
			assert.False(t, d.Allowed, "a hit 1 ms before the end")
			assert.Equal(t, time.Millisecond, d.RetryAfter)
			c.Set(r.ResetAt)
			n, err := w.Hit(ctx, "k", 1, 1)
			require.NoError(t, err)
			assert.True(t, n.Allowed, "a hit at the end instant")
			assert.Equal(t, int64(1), n.Count)
			assert.True(t, r.ResetAt.Add(tt.scale).Equal(n.ResetAt), "next window ends at %v", n.ResetAt.UTC())
		})
	}
}
