package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/require"
)

// t0 is 20.3 seconds into a minute: a one-minute window ends 39.7 s later.
var t0 = time.Date(2026, 1, 1, 12, 0, 20, 300*int(time.Millisecond), time.UTC)

// fakeClock is a settable clock shared by the DB and the middleware.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// openDB opens an in-memory DB on clock, without background work, closed
// at the end of the test.
func openDB(t *testing.T, clock *fakeClock) *ratedb.DB {
	t.Helper()
	db, err := ratedb.Open("", &ratedb.Options{Clock: clock.Now, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 1 << 10})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// fixedMinute returns db's one-minute fixed window.
func fixedMinute(t *testing.T, db *ratedb.DB) *ratedb.Window {
	t.Helper()
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	return w
}

// counting is a next handler that counts its calls and answers 200 "ok".
type counting struct{ n atomic.Int64 }

func (c *counting) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c.n.Add(1)
	_, _ = w.Write([]byte("ok"))
}

// do sends a GET for path from remote through h.
func do(h http.Handler, path, remote string, hdr ...string) *httptest.ResponseRecorder {
	return doReq(h, "GET", path, remote, hdr...)
}

func doReq(h http.Handler, method, path, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// rateHeaders lists every rate-limit header name the middleware may set.
var rateHeaders = []string{
	"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy",
	"Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
}

func noRateHeaders(t *testing.T, h http.Header) {
	t.Helper()
	for _, name := range rateHeaders {
		require.Empty(t, h.Values(name), "header %s", name)
	}
}

// failing is a ratedb.Limiter whose every method fails with err.
type failing struct {
	err   error
	calls atomic.Int64
}

var _ ratedb.Limiter = (*failing)(nil)

func (f *failing) Hit(context.Context, string, int64, int64) (ratedb.Result, error) {
	f.calls.Add(1)
	return ratedb.Result{}, f.err
}
func (f *failing) Inc(context.Context, string, int64) (int64, error) { return 0, f.err }
func (f *failing) Get(context.Context, string) (int64, error)        { return 0, f.err }
func (f *failing) Set(context.Context, string, int64) (int64, error) { return 0, f.err }
func (f *failing) ExpiresAt(context.Context, string) (time.Time, error) {
	return time.Time{}, f.err
}
func (f *failing) Refund(context.Context, string, int64) (int64, time.Time, error) {
	return 0, time.Time{}, f.err
}
func (f *failing) Undo(context.Context, string, ratedb.Result, int64) error { return f.err }
func (f *failing) Reset(context.Context, string) error                      { return f.err }
func (f *failing) Scale() time.Duration                                     { return time.Minute }
