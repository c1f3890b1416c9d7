package redisstore_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/httplimit"
	"github.com/ratedb/ratedb/internal/limitertest"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// redisstore's limiters are what httplimit takes, and undoes with, as the
// embedded DB's are.
var (
	_ httplimit.Rater  = (*redisstore.Layered)(nil)
	_ httplimit.Undoer = (*redisstore.Layered)(nil)
	_ httplimit.Undoer = (*redisstore.Window)(nil)
)

// TestHTTPMiddleware runs the httplimit middleware, unchanged, over
// redisstore limiters: headers, 429, and the failure policy when Redis does
// not answer (503, or the request let through with FailOpen).
func TestHTTPMiddleware(t *testing.T) {
	srv := startServer(t)
	clock := limitertest.NewClock()
	clock.Advance(20*time.Second + 300*time.Millisecond) // a one-minute window ends 39.7 s later
	s, err := redisstore.New(srv.Client(t, nil), &redisstore.Options{
		Prefix: newPrefix(), Clock: redisstore.LocalClock(clock.Now), Timeout: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	w, err := s.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	var served atomic.Int64
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) })
	do := func(h http.Handler) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		h.ServeHTTP(rec, req)
		return rec
	}

	m, err := httplimit.New(httplimit.Window(w, 3), &httplimit.Options{Clock: clock.Now})
	require.NoError(t, err)
	h := m.Handler(next)
	for i, want := range []string{"2", "1", "0"} {
		rec := do(h)
		require.Equal(t, http.StatusOK, rec.Code, "request %d", i+1)
		assert.Equal(t, "3", rec.Header().Get("RateLimit-Limit"))
		assert.Equal(t, want, rec.Header().Get("RateLimit-Remaining"))
		assert.Equal(t, "40", rec.Header().Get("RateLimit-Reset"), "39.7 s rounded up")
		assert.Equal(t, "3;w=60", rec.Header().Get("RateLimit-Policy"))
	}
	rec := do(h)
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "40", rec.Header().Get("Retry-After"))
	assert.EqualValues(t, 3, served.Load())

	// A Layered limiter is a Rater as it is.
	l, err := s.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 1}, ratedb.Tier{Scale: time.Hour, Limit: 10})
	require.NoError(t, err)
	ml, err := httplimit.New(l, &httplimit.Options{Clock: clock.Now})
	require.NoError(t, err)
	hl := ml.Handler(next)
	rec = do(hl)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "1;w=60, 10;w=3600", rec.Header().Get("RateLimit-Policy"))
	rec = do(hl)
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)

	// Redis does not answer: no decision, the middleware's policy applies.
	var errs []error
	closed, err := httplimit.New(httplimit.Window(w, 3), &httplimit.Options{
		Clock: clock.Now, OnError: func(_ *http.Request, err error) { errs = append(errs, err) },
	})
	require.NoError(t, err)
	open, err := httplimit.New(httplimit.Window(w, 3), &httplimit.Options{Clock: clock.Now, FailOpen: true})
	require.NoError(t, err)
	srv.Pause()
	rec = do(closed.Handler(next))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Len(t, errs, 1)
	assert.True(t, errors.Is(errs[0], ratedb.ErrUnavailable))
	before := served.Load()
	rec = do(open.Handler(next))
	assert.Equal(t, http.StatusOK, rec.Code, "FailOpen lets the request through")
	assert.Empty(t, rec.Header().Get("RateLimit-Limit"))
	assert.Equal(t, before+1, served.Load())
	srv.Resume()
}
