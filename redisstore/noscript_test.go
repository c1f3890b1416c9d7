package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoScriptFallback empties Redis's script cache (SCRIPT FLUSH, as a
// restart or a failover to a replica does) before every call: each call
// gets NOSCRIPT for its EVALSHA and must recover with EVAL, for every
// method of a Window and a Layered limiter, with DedupWindow off and on.
// Then the reply to that EVAL is lost (a proxy forwards it, Redis runs it,
// the proxy cuts the connection): the fallback must be sent as the EVALSHA
// was, so a call go-redis may not resend (Refund, Undo, Set, Reset, and Hit
// and Inc without DedupWindow) ran once and returns ErrUnavailable, and
// with DedupWindow a retried Hit or Inc returns its first answer, counted
// once.
func TestNoScriptFallback(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	admin := srv.Client(t, nil)
	flush := func() { require.NoError(t, admin.ScriptFlush(ctx).Err()) }
	p := newProxy(t, srv.Addr(), "\r\neval\r\n") // EVAL, not EVALSHA
	tiers := []ratedb.Tier{{Scale: time.Minute, Limit: 100}, {Scale: time.Hour, Limit: 100}}
	for _, dedup := range []time.Duration{0, 5 * time.Second} {
		c := redis.NewClient(&redis.Options{Addr: p.Addr()}) // MaxRetries: the default, 3
		t.Cleanup(func() { _ = c.Close() })
		prefix := newPrefix()
		// A clock that stands still, so that no window ends mid-test; Redis
		// keeps the keys one scale past their end.
		now := time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)
		clock := redisstore.LocalClock(func() time.Time { return now })
		s, err := redisstore.New(c, &redisstore.Options{Prefix: prefix, Clock: clock, Timeout: 5 * time.Second, DedupWindow: dedup})
		require.NoError(t, err)
		w, err := s.Window(ratedb.FixedWindow, time.Hour)
		require.NoError(t, err)
		l, err := s.Layered(ratedb.FixedWindow, tiers...)
		require.NoError(t, err)
		direct, err := redisstore.New(admin, &redisstore.Options{Prefix: prefix, Clock: clock, Timeout: 5 * time.Second})
		require.NoError(t, err)
		dw, err := direct.Window(ratedb.FixedWindow, time.Hour)
		require.NoError(t, err)
		dl, err := direct.Layered(ratedb.FixedWindow, tiers...)
		require.NoError(t, err)
		count := func(key string) int64 {
			n, err := dw.Get(ctx, key)
			require.NoError(t, err)
			return n
		}

		// Every call recovers from an empty script cache.
		flush()
		r, err := w.Hit(ctx, "a", 100, 1)
		require.NoError(t, err, "dedup %v: Hit", dedup)
		flush()
		n, err := w.Inc(ctx, "a", 2)
		require.NoError(t, err, "Inc")
		assert.Equal(t, int64(3), n)
		flush()
		n, _, err = w.Refund(ctx, "a", 1)
		require.NoError(t, err, "Refund")
		assert.Equal(t, int64(2), n)
		flush()
		require.NoError(t, w.Undo(ctx, "a", r, 1), "Undo")
		flush()
		n, err = w.Get(ctx, "a")
		require.NoError(t, err, "Get")
		assert.Equal(t, int64(1), n)
		flush()
		_, err = w.Set(ctx, "a", 7)
		require.NoError(t, err, "Set")
		flush()
		n, _, err = w.State(ctx, "a")
		require.NoError(t, err, "State")
		assert.Equal(t, int64(7), n)
		flush()
		require.NoError(t, w.Reset(ctx, "a"), "Reset")
		assert.Equal(t, int64(0), count("a"))
		flush()
		lr, err := l.Hit(ctx, "a", 1)
		require.NoError(t, err, "Layered.Hit")
		flush()
		_, err = l.Inc(ctx, "a", 1)
		require.NoError(t, err, "Layered.Inc")
		flush()
		_, err = l.Refund(ctx, "a", 1)
		require.NoError(t, err, "Layered.Refund")
		flush()
		require.NoError(t, l.Undo(ctx, "a", lr, 1), "Layered.Undo")
		flush()
		g, err := l.Get(ctx, "a")
		require.NoError(t, err, "Layered.Get")
		assert.Equal(t, []int64{0, 0}, g)
		flush()
		require.NoError(t, l.Reset(ctx, "a"), "Layered.Reset")

		// The EVAL's reply is lost after Redis ran it.
		cut := func(name string, call func() error) {
			t.Helper()
			flush()
			before := p.cuts.Load()
			p.Arm(1)
			err := call()
			require.Equal(t, before+1, p.cuts.Load(), "%s: the EVAL's reply was cut", name)
			p.Arm(0)
			if dedup > 0 && (name == "Hit" || name == "Inc" || name == "Layered.Hit") {
				require.NoError(t, err, "%s with DedupWindow: go-redis resends it, answered from the first run", name)
			} else {
				require.ErrorIs(t, err, ratedb.ErrUnavailable, "%s: sent once, its reply lost", name)
			}
		}
		_, err = dw.Set(ctx, "b", 10)
		require.NoError(t, err)
		cut("Hit", func() error { _, err := w.Hit(ctx, "b", 100, 1); return err })
		assert.Equal(t, int64(11), count("b"), "dedup %v: the Hit counted once", dedup)
		cut("Inc", func() error { _, err := w.Inc(ctx, "b", 2); return err })
		assert.Equal(t, int64(13), count("b"), "dedup %v: the Inc counted once", dedup)
		cut("Refund", func() error { _, _, err := w.Refund(ctx, "b", 3); return err })
		assert.Equal(t, int64(10), count("b"), "the Refund gave back once")
		undone, err := dw.Hit(ctx, "b", 100, 4)
		require.NoError(t, err)
		cut("Undo", func() error { return w.Undo(ctx, "b", undone, 4) })
		assert.Equal(t, int64(10), count("b"), "the Undo took back once")
		_, err = dw.Hit(ctx, "c", 100, 1)
		require.NoError(t, err)
		cut("Reset", func() error { return w.Reset(ctx, "c") })
		assert.Equal(t, int64(0), count("c"), "the Reset ran")
		cut("Set", func() error { _, err := w.Set(ctx, "c", 5); return err })
		assert.Equal(t, int64(5), count("c"), "the Set ran")
		_, err = dl.Inc(ctx, "b", 10)
		require.NoError(t, err)
		cut("Layered.Hit", func() error { _, err := l.Hit(ctx, "b", 1); return err })
		g, err = dl.Get(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, []int64{11, 11}, g, "dedup %v: the Layered Hit counted once", dedup)
		cut("Layered.Refund", func() error { _, err := l.Refund(ctx, "b", 3); return err })
		g, err = dl.Get(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, []int64{8, 8}, g, "the Layered Refund gave back once")
	}
}
