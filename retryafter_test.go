package ratedb_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Result.RetryAfter's doc: a denied hit fits again after RetryAfter, or
// earlier if a Refund (or Undo, Set, Reset) lowers the count; hits never do.
func TestRetryAfterUnlessRefunded(t *testing.T) {
	modes(t, func(t *testing.T, path string) {
		c := newClock()
		db := openDB(t, path, testOptions(c))
		w, err := db.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		bg := context.Background()
		_, err = w.Hit(bg, "k", 1, 1)
		require.NoError(t, err)
		r, err := w.Hit(bg, "k", 1, 1)
		require.NoError(t, err)
		require.False(t, r.Allowed)
		assert.Equal(t, time.Minute, r.RetryAfter)
		c.Advance(r.RetryAfter - time.Millisecond)
		r, err = w.Hit(bg, "k", 1, 1)
		require.NoError(t, err)
		assert.False(t, r.Allowed, "denied until RetryAfter has passed")
		_, _, err = w.Refund(bg, "k", 1)
		require.NoError(t, err)
		r, err = w.Hit(bg, "k", 1, 1)
		require.NoError(t, err)
		assert.True(t, r.Allowed, "a refund makes room before RetryAfter")
	})
}
