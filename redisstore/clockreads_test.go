package redisstore_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// LocalClock's doc: f is called once per operation.
func TestLocalClockReadOncePerCall(t *testing.T) {
	srv := startServer(t)
	var reads atomic.Int64
	now := time.UnixMilli(1_767_225_600_000)
	clock := redisstore.LocalClock(func() time.Time { reads.Add(1); return now })
	st, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{Prefix: newPrefix(), Timeout: 5 * time.Second, Clock: clock})
	require.NoError(t, err)
	w, err := st.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	l, err := st.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5}, ratedb.Tier{Scale: time.Hour, Limit: 9})
	require.NoError(t, err)
	wr, err := w.Hit(ctx, "k", 5, 1)
	require.NoError(t, err)
	lr, err := l.Hit(ctx, "k", 1)
	require.NoError(t, err)
	calls := []struct {
		name string
		call func() error
	}{
		{"Hit", func() error { _, err := w.Hit(ctx, "k", 5, 1); return err }},
		{"Hit over the limit", func() error { _, err := w.Hit(ctx, "k", 5, 6); return err }},
		{"Inc", func() error { _, err := w.Inc(ctx, "k", 1); return err }},
		{"Get", func() error { _, err := w.Get(ctx, "k"); return err }},
		{"State", func() error { _, _, err := w.State(ctx, "k"); return err }},
		{"Set", func() error { _, err := w.Set(ctx, "k", 2); return err }},
		{"Refund", func() error { _, _, err := w.Refund(ctx, "k", 1); return err }},
		{"Undo", func() error { return w.Undo(ctx, "k", wr, 1) }},
		{"Reset", func() error { return w.Reset(ctx, "k") }},
		{"Layered.Hit", func() error { _, err := l.Hit(ctx, "k", 1); return err }},
		{"Layered.Inc", func() error { _, err := l.Inc(ctx, "k", 1); return err }},
		{"Layered.State", func() error { _, _, err := l.State(ctx, "k"); return err }},
		{"Layered.Refund", func() error { _, err := l.Refund(ctx, "k", 1); return err }},
		{"Layered.Undo", func() error { return l.Undo(ctx, "k", lr, 1) }},
		{"Layered.Reset", func() error { return l.Reset(ctx, "k") }},
	}
	for _, tc := range calls {
		before := reads.Load()
		require.NoError(t, tc.call(), tc.name)
		assert.Equal(t, int64(1), reads.Load()-before, tc.name)
	}
}
