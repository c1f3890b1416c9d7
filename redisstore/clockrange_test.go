package redisstore_test

import (
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A LocalClock reading so far from 1970 that its Unix milliseconds do not
// fit in an int64 is out of range, as in the embedded DB: time.Time's
// UnixMilli wraps for it (these readings wrap to 384 and 616 ms after the
// epoch), and the far past one passed the check on the wrapped value.
func TestLocalClockRangeBeyondUnixMilli(t *testing.T) {
	srv := startServer(t)
	for _, at := range []time.Time{
		time.Unix(18_446_744_073_709_552, 0),
		time.Unix(-18_446_744_073_709_551, 0),
		time.UnixMilli(-1),
	} {
		s, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second,
			Clock: redisstore.LocalClock(func() time.Time { return at })})
		require.NoError(t, err)
		w, err := s.Window(ratedb.FixedWindow, time.Second)
		require.NoError(t, err)
		_, err = w.Hit(ctx, "k", 1, 1)
		assert.ErrorIs(t, err, ratedb.ErrClockOutOfRange, "Hit at Unix %d (UnixMilli %d)", at.Unix(), at.UnixMilli())
	}
}
