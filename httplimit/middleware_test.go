package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/httplimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The handler shape chi's Router.Use and Chain accept.
type chiMiddleware = func(http.Handler) http.Handler

var _ chiMiddleware = (*httplimit.Middleware)(nil).Handler

func TestHeadersAllowedAndDenied(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 3), &httplimit.Options{Clock: clock.Now})
	require.NoError(t, err)
	next := &counting{}
	h := m.Handler(next)

	for i, want := range []string{"2", "1", "0"} {
		rec := do(h, "/", "192.0.2.1:1234")
		require.Equal(t, http.StatusOK, rec.Code, "request %d", i+1)
		assert.Equal(t, "3", rec.Header().Get("RateLimit-Limit"))
		assert.Equal(t, want, rec.Header().Get("RateLimit-Remaining"))
		assert.Equal(t, "40", rec.Header().Get("RateLimit-Reset"), "39.7 s rounded up")
		assert.Equal(t, "3;w=60", rec.Header().Get("RateLimit-Policy"))
		assert.Empty(t, rec.Header().Get("Retry-After"))
		assert.Empty(t, rec.Header().Get("X-RateLimit-Limit"), "legacy headers are off by default")
	}
	rec := do(h, "/", "192.0.2.1:1234")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "Too Many Requests\n", rec.Body.String())
	assert.Equal(t, "3", rec.Header().Get("RateLimit-Limit"))
	assert.Equal(t, "0", rec.Header().Get("RateLimit-Remaining"))
	assert.Equal(t, "40", rec.Header().Get("RateLimit-Reset"))
	assert.Equal(t, "3;w=60", rec.Header().Get("RateLimit-Policy"))
	assert.Equal(t, "40", rec.Header().Get("Retry-After"))
	assert.EqualValues(t, 3, next.n.Load(), "a denied request must not reach next")

	// Another client has its own quota.
	rec = do(h, "/", "192.0.2.2:1234")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "2", rec.Header().Get("RateLimit-Remaining"))

	// The next window starts afresh.
	clock.Set(t0.Add(40 * time.Second))
	rec = do(h, "/", "192.0.2.1:1234")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "2", rec.Header().Get("RateLimit-Remaining"))
	assert.Equal(t, "60", rec.Header().Get("RateLimit-Reset"))
	assert.EqualValues(t, 0, m.Errors())
}

func TestResetAndRetryAfterRoundUp(t *testing.T) {
	minute := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		at   time.Duration // offset into the minute
		want string        // RateLimit-Reset of the allowed hit and Retry-After of the denied one
	}{
		{"window start", 0, "60"},
		{"1 ms in", time.Millisecond, "60"},
		{"half a second left", 59500 * time.Millisecond, "1"},
		{"1 ms left", 59999 * time.Millisecond, "1"},
		{"exactly 1 s left", 59 * time.Second, "1"},
		{"1.001 s left", 58999 * time.Millisecond, "2"},
		{"29.5 s left", 30500 * time.Millisecond, "30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newClock(minute.Add(tc.at))
			db := openDB(t, clock)
			m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{Clock: clock.Now})
			require.NoError(t, err)
			h := m.Handler(&counting{})

			rec := do(h, "/", "192.0.2.1:1")
			require.Equal(t, http.StatusOK, rec.Code)
			assert.Equal(t, tc.want, rec.Header().Get("RateLimit-Reset"))

			rec = do(h, "/", "192.0.2.1:1")
			require.Equal(t, http.StatusTooManyRequests, rec.Code)
			assert.Equal(t, tc.want, rec.Header().Get("Retry-After"))
			assert.Equal(t, tc.want, rec.Header().Get("RateLimit-Reset"))
		})
	}
}

func TestResetNeverZeroWhenMiddlewareClockIsAhead(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	ahead := func() time.Time { return clock.Now().Add(2 * time.Minute) }
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{Clock: ahead})
	require.NoError(t, err)
	rec := do(m.Handler(&counting{}), "/", "192.0.2.1:1")
	assert.Equal(t, "1", rec.Header().Get("RateLimit-Reset"))
}

// A denial's RateLimit-Reset is the limiter's RetryAfter, as Retry-After
// is: the two agree even when the middleware's clock and the DB's disagree
// (here by an hour, as after a step of the wall clock that the DB's
// default clock does not follow).
func TestDenialResetAgreesWithRetryAfter(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	behind := func() time.Time { return clock.Now().Add(-time.Hour) }
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{Clock: behind})
	require.NoError(t, err)
	h := m.Handler(&counting{})
	require.Equal(t, http.StatusOK, do(h, "/", "192.0.2.1:1").Code)
	rec := do(h, "/", "192.0.2.1:1")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "40", rec.Header().Get("Retry-After"))
	assert.Equal(t, "40", rec.Header().Get("RateLimit-Reset"))
}

func TestLegacyHeaders(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{Clock: clock.Now, LegacyHeaders: true})
	require.NoError(t, err)
	h := m.Handler(&counting{})
	end := strconv.FormatInt(time.Date(2026, 1, 1, 12, 1, 0, 0, time.UTC).Unix(), 10)

	for _, code := range []int{http.StatusOK, http.StatusTooManyRequests} {
		rec := do(h, "/", "192.0.2.1:1")
		require.Equal(t, code, rec.Code)
		assert.Equal(t, "1", rec.Header().Get("X-RateLimit-Limit"))
		assert.Equal(t, "0", rec.Header().Get("X-RateLimit-Remaining"))
		assert.Equal(t, end, rec.Header().Get("X-RateLimit-Reset"), "Unix seconds of the window end")
		assert.Equal(t, "40", rec.Header().Get("RateLimit-Reset"), "the standard headers stay")
	}
}

func TestLayeredLongerTierDenies(t *testing.T) {
	noon := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := newClock(noon)
	db := openDB(t, clock)
	l, err := db.Layered(ratedb.FixedWindow,
		ratedb.Tier{Scale: time.Minute, Limit: 2},
		ratedb.Tier{Scale: time.Hour, Limit: 3})
	require.NoError(t, err)
	m, err := httplimit.New(l, &httplimit.Options{Clock: clock.Now})
	require.NoError(t, err)
	h := m.Handler(&counting{})

	type want struct {
		code                           int
		limit, remaining, reset, retry string
	}
	check := func(step string, w want) {
		t.Helper()
		rec := do(h, "/", "192.0.2.1:1")
		require.Equal(t, w.code, rec.Code, step)
		assert.Equal(t, w.limit, rec.Header().Get("RateLimit-Limit"), step)
		assert.Equal(t, w.remaining, rec.Header().Get("RateLimit-Remaining"), step)
		assert.Equal(t, w.reset, rec.Header().Get("RateLimit-Reset"), step)
		assert.Equal(t, w.retry, rec.Header().Get("Retry-After"), step)
		assert.Equal(t, "2;w=60, 3;w=3600", rec.Header().Get("RateLimit-Policy"), step)
	}
	check("1st: minute tier binds (least room)", want{200, "2", "1", "60", ""})
	check("2nd: minute tier full", want{200, "2", "0", "60", ""})
	check("3rd: denied by the minute tier", want{429, "2", "0", "60", "60"})

	clock.Set(noon.Add(time.Minute))
	check("4th: hour tier now has the least room", want{200, "3", "0", "3540", ""})
	check("5th: minute tier has room, hour tier denies", want{429, "3", "0", "3540", "3540"})

	counts, err := l.Get(context.Background(), "192.0.2.1")
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 3}, counts, "denied requests change no tier")
}

// An allowed request that fills several tiers at once gets the headers of
// the one that frees up last: the README's login tiers (1 per minute, 3 per
// 15 minutes) are both full after the third login of a quarter, and
// "Remaining: 0, Reset: 60" would send the client back in a minute, to be
// denied until the quarter ends. The headers agree with the denial that
// follows.
func TestLayeredFullTiersReportTheLastToFreeUp(t *testing.T) {
	noon := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := newClock(noon)
	db := openDB(t, clock)
	l, err := db.Layered(ratedb.FixedWindow,
		ratedb.Tier{Scale: time.Minute, Limit: 1},
		ratedb.Tier{Scale: 15 * time.Minute, Limit: 3},
		ratedb.Tier{Scale: time.Hour, Limit: 10})
	require.NoError(t, err)
	m, err := httplimit.New(l, &httplimit.Options{Clock: clock.Now, LegacyHeaders: true})
	require.NoError(t, err)
	h := m.Handler(&counting{})
	quarter := strconv.FormatInt(noon.Add(15*time.Minute).Unix(), 10)

	for i, want := range []struct{ limit, reset, legacy string }{
		{"1", "60", strconv.FormatInt(noon.Add(time.Minute).Unix(), 10)},
		{"1", "60", strconv.FormatInt(noon.Add(2*time.Minute).Unix(), 10)},
		{"3", "780", quarter}, // the minute and the quarter are full
	} {
		rec := do(h, "/", "192.0.2.1:1")
		require.Equal(t, http.StatusOK, rec.Code, "login %d", i+1)
		assert.Equal(t, want.limit, rec.Header().Get("RateLimit-Limit"), "login %d", i+1)
		assert.Equal(t, "0", rec.Header().Get("RateLimit-Remaining"), "login %d", i+1)
		assert.Equal(t, want.reset, rec.Header().Get("RateLimit-Reset"), "login %d", i+1)
		assert.Equal(t, want.limit, rec.Header().Get("X-RateLimit-Limit"), "login %d", i+1)
		assert.Equal(t, want.legacy, rec.Header().Get("X-RateLimit-Reset"), "login %d", i+1)
		clock.Set(clock.Now().Add(time.Minute))
	}
	// A minute after the third login, as "Reset: 60" would have said.
	rec := do(h, "/", "192.0.2.1:1")
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "3", rec.Header().Get("RateLimit-Limit"))
	assert.Equal(t, "720", rec.Header().Get("RateLimit-Reset"))
	assert.Equal(t, "720", rec.Header().Get("Retry-After"))
	assert.Equal(t, quarter, rec.Header().Get("X-RateLimit-Reset"))
}

func TestCost(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	var gotErr error
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 5), &httplimit.Options{
		Clock: clock.Now,
		Cost: func(r *http.Request) int64 {
			switch r.Method {
			case http.MethodPost:
				return 3
			case http.MethodDelete:
				return 0
			}
			return 1
		},
		OnError: func(_ *http.Request, err error) { gotErr = err },
	})
	require.NoError(t, err)
	h := m.Handler(&counting{})

	rec := doReq(h, "POST", "/", "192.0.2.1:1")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "2", rec.Header().Get("RateLimit-Remaining"))

	rec = doReq(h, "POST", "/", "192.0.2.1:1")
	require.Equal(t, http.StatusTooManyRequests, rec.Code, "3 more does not fit in 2")
	assert.Equal(t, "2", rec.Header().Get("RateLimit-Remaining"), "a denied request takes nothing")

	rec = doReq(h, "GET", "/", "192.0.2.1:1")
	require.Equal(t, http.StatusOK, rec.Code, "1 still fits")
	assert.Equal(t, "1", rec.Header().Get("RateLimit-Remaining"))

	rec = doReq(h, "DELETE", "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "cost 0 is an error, not an exemption")
	noRateHeaders(t, rec.Header())
	assert.ErrorIs(t, gotErr, httplimit.ErrInvalidCost)
	assert.EqualValues(t, 1, m.Errors())

	n, err := fixedMinute(t, db).Get(context.Background(), "192.0.2.1")
	require.NoError(t, err)
	assert.EqualValues(t, 4, n)
}

func TestExempt(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	w := fixedMinute(t, db)
	m, err := httplimit.New(httplimit.Window(w, 1), &httplimit.Options{
		Clock:  clock.Now,
		Exempt: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	})
	require.NoError(t, err)
	next := &counting{}
	h := m.Handler(next)

	for range 3 {
		rec := do(h, "/healthz", "192.0.2.1:1")
		require.Equal(t, http.StatusOK, rec.Code)
		noRateHeaders(t, rec.Header())
	}
	n, err := w.Get(context.Background(), "192.0.2.1")
	require.NoError(t, err)
	assert.Zero(t, n, "exempt requests are not counted")

	assert.Equal(t, http.StatusOK, do(h, "/api", "192.0.2.1:1").Code)
	assert.Equal(t, http.StatusTooManyRequests, do(h, "/api", "192.0.2.1:1").Code)
	assert.Equal(t, http.StatusOK, do(h, "/healthz", "192.0.2.1:1").Code, "exempt even when over the limit")
	assert.EqualValues(t, 5, next.n.Load())
}

// errSecret stands for a store error whose text must not reach clients.
var errSecret = errors.New("bbolt: page 42 corrupt at /var/lib/secret-path for key 192.0.2.1")

func TestStoreErrorFailsClosed(t *testing.T) {
	fake := &failing{err: fmt.Errorf("wrapped: %w", errSecret)}
	var seen []error
	m, err := httplimit.New(httplimit.Window(fake, 10), &httplimit.Options{
		OnError: func(_ *http.Request, err error) { seen = append(seen, err) },
	})
	require.NoError(t, err)
	next := &counting{}
	h := m.Handler(next)

	for i := 1; i <= 2; i++ {
		rec := do(h, "/", "192.0.2.1:1")
		require.Equal(t, http.StatusServiceUnavailable, rec.Code)
		assert.Equal(t, "Service Unavailable\n", rec.Body.String())
		assert.NotContains(t, rec.Body.String(), "bbolt")
		assert.NotContains(t, rec.Body.String(), "192.0.2.1")
		for _, vs := range rec.Header() {
			for _, v := range vs {
				assert.NotContains(t, v, "secret")
			}
		}
		noRateHeaders(t, rec.Header())
		assert.EqualValues(t, i, m.Errors())
	}
	assert.Zero(t, next.n.Load())
	require.Len(t, seen, 2)
	assert.ErrorIs(t, seen[0], errSecret)
}

func TestStoreErrorFailsOpen(t *testing.T) {
	fake := &failing{err: errSecret}
	calls := 0
	m, err := httplimit.New(httplimit.Window(fake, 10), &httplimit.Options{
		FailOpen: true,
		OnError:  func(*http.Request, error) { calls++ },
	})
	require.NoError(t, err)
	next := &counting{}
	h := m.Handler(next)

	for i := 1; i <= 3; i++ {
		rec := do(h, "/", "192.0.2.1:1")
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "ok", rec.Body.String())
		noRateHeaders(t, rec.Header())
		assert.EqualValues(t, i, m.Errors())
	}
	assert.EqualValues(t, 3, next.n.Load())
	assert.Equal(t, 3, calls)
}

func TestClosedDB(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	var got error
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), &httplimit.Options{
		OnError: func(_ *http.Request, err error) { got = err },
	})
	require.NoError(t, err)
	require.NoError(t, db.Close())

	rec := do(m.Handler(&counting{}), "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.ErrorIs(t, got, ratedb.ErrClosed)
	assert.EqualValues(t, 1, m.Errors())
}

func TestCustomUnavailable(t *testing.T) {
	m, err := httplimit.New(httplimit.Window(&failing{err: errSecret}, 10), &httplimit.Options{
		OnUnavailable: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusInternalServerError)
		}),
	})
	require.NoError(t, err)
	rec := do(m.Handler(&counting{}), "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.Equal(t, "5", rec.Header().Get("Retry-After"))
}

func TestClientGoneIsNotAnError(t *testing.T) {
	fake := &failing{err: context.Canceled}
	called := false
	m, err := httplimit.New(httplimit.Window(fake, 10), &httplimit.Options{
		OnError: func(*http.Request, error) { called = true },
	})
	require.NoError(t, err)
	next := &counting{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	m.Handler(next).ServeHTTP(httptest.NewRecorder(), r)

	assert.EqualValues(t, 1, fake.calls.Load())
	assert.Zero(t, m.Errors())
	assert.False(t, called)
	assert.Zero(t, next.n.Load())

	// The same error while the client is still there is counted.
	do(m.Handler(next), "/", "192.0.2.1:1")
	assert.EqualValues(t, 1, m.Errors())
	assert.True(t, called)
}

func TestCustomOnLimited(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 0), &httplimit.Options{
		Clock: clock.Now,
		OnLimited: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"retry_after":%s}`, w.Header().Get("Retry-After"))
		}),
	})
	require.NoError(t, err)
	rec := do(m.Handler(&counting{}), "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.JSONEq(t, `{"retry_after":40}`, rec.Body.String())
	assert.Equal(t, "0", rec.Header().Get("RateLimit-Limit"))
}

func TestLongKeysAreDigested(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{
		Clock:   clock.Now,
		KeyFunc: func(r *http.Request) (string, error) { return strings.Repeat(r.URL.Query().Get("k"), 5000), nil },
	})
	require.NoError(t, err)
	h := m.Handler(&counting{})

	assert.Equal(t, http.StatusOK, do(h, "/?k=a", "192.0.2.1:1").Code, "a key over ratedb.MaxKeyLen still works")
	assert.Equal(t, http.StatusTooManyRequests, do(h, "/?k=a", "192.0.2.1:1").Code, "and keeps its counter")
	assert.Equal(t, http.StatusOK, do(h, "/?k=b", "192.0.2.1:1").Code, "other long keys have their own")
	assert.Zero(t, m.Errors())
}

func TestConcurrentRequests(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	const limit, n = 50, 200
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), limit), &httplimit.Options{Clock: clock.Now})
	require.NoError(t, err)
	next := &counting{}
	h := m.Handler(next)

	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { codes[i] = do(h, "/", "[2001:db8::1]:1").Code })
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == http.StatusOK {
			ok++
		} else {
			require.Equal(t, http.StatusTooManyRequests, c)
		}
	}
	assert.Equal(t, limit, ok)
	assert.EqualValues(t, limit, next.n.Load())
}

// Many goroutines sharing one middleware, several requests each, over
// several windows: each window allows exactly its limit, every allowed
// request reaches the handler once, and with Undo the count a window ends
// with is exactly its allowed failures (every success given back once).
func TestConcurrentExactPerWindow(t *testing.T) {
	const goroutines, perWindow, limit, windows = 8, 25, 60, 3
	for _, undo := range []bool{false, true} {
		t.Run(fmt.Sprintf("undo=%v", undo), func(t *testing.T) {
			clock := newClock(t0)
			db := openDB(t, clock)
			w := fixedMinute(t, db)
			opts := &httplimit.Options{Clock: clock.Now}
			if undo {
				opts.Undo = onlyFailures
			}
			m, err := httplimit.New(httplimit.Window(w, limit), opts)
			require.NoError(t, err)
			var reached sync.Map // request id -> times it reached the handler
			h := m.Handler(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				n, _ := reached.LoadOrStore(r.URL.Query().Get("id"), new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				if r.Header.Get("Password") != "right" {
					rw.WriteHeader(http.StatusUnauthorized)
				}
			}))
			for win := range windows {
				clock.Set(t0.Add(time.Duration(win) * time.Minute))
				var ok, failed atomic.Int64
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						for i := range perWindow {
							pw := "right"
							if i%3 == 0 {
								pw = "wrong"
							}
							path := fmt.Sprintf("/?id=%d-%d-%d", win, g, i)
							switch rec := do(h, path, "[2001:db8::1]:1", "Password", pw); rec.Code {
							case http.StatusOK:
								ok.Add(1)
							case http.StatusUnauthorized:
								failed.Add(1)
							default:
								assert.Equal(t, http.StatusTooManyRequests, rec.Code)
							}
						}
					})
				}
				wg.Wait()
				n, err := w.Get(context.Background(), "2001:db8::/64")
				require.NoError(t, err)
				if undo {
					assert.Equal(t, failed.Load(), n, "window %d: every success given back, once", win)
				} else {
					assert.EqualValues(t, limit, ok.Load()+failed.Load(), "window %d: exactly the limit allowed", win)
					assert.EqualValues(t, limit, n, "window %d", win)
				}
			}
			reached.Range(func(_, n any) bool {
				assert.EqualValues(t, 1, n.(*atomic.Int64).Load())
				return true
			})
			assert.Zero(t, m.Errors())
		})
	}
}

func TestNew(t *testing.T) {
	db := openDB(t, newClock(t0))
	w := fixedMinute(t, db)
	for _, tc := range []struct {
		name  string
		rater httplimit.Rater
		ok    bool
	}{
		{"window", httplimit.Window(w, 10), true},
		{"zero limit", httplimit.Window(w, 0), true},
		{"nil rater", nil, false},
		{"nil limiter", httplimit.Window(nil, 10), false},
		{"nil *ratedb.Window", httplimit.Window((*ratedb.Window)(nil), 10), false},
		{"negative limit", httplimit.Window(w, -1), false},
		{"nil *ratedb.Layered", (*ratedb.Layered)(nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := httplimit.New(tc.rater, nil)
			if tc.ok {
				require.NoError(t, err)
				assert.NotNil(t, m)
			} else {
				assert.ErrorIs(t, err, ratedb.ErrInvalidArgument, "New's doc: a bad Rater is an invalid argument")
				assert.Nil(t, m)
			}
		})
	}
	// Options.Undo with a Rater that cannot undo.
	m, err := httplimit.New(&fieldRater{limit: 1}, &httplimit.Options{Undo: func(*http.Request, int) bool { return true }})
	assert.ErrorIs(t, err, ratedb.ErrInvalidArgument, "Options.Undo with a Rater that is not an Undoer")
	assert.Nil(t, m)
	_, err = httplimit.New((*fieldRater)(nil), nil)
	assert.ErrorIs(t, err, ratedb.ErrInvalidArgument, "a typed nil Rater")

	m, err = httplimit.New(httplimit.Window(w, 1), nil)
	require.NoError(t, err)
	assert.PanicsWithValue(t, "httplimit: nil handler", func() { m.Handler(nil) })
}

func TestOptionsAreCopied(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	opts := &httplimit.Options{Clock: clock.Now}
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), opts)
	require.NoError(t, err)
	opts.Exempt = func(*http.Request) bool { return true }
	h := m.Handler(&counting{})
	do(h, "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusTooManyRequests, do(h, "/", "192.0.2.1:1").Code)
}

// chain applies middlewares the way chi does: the first one is outermost.
func chain(h http.Handler, mws ...chiMiddleware) http.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

func TestComposesAsChiMiddleware(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	perMinute := fixedMinute(t, db)
	ip, err := httplimit.New(httplimit.Window(perMinute, 2), &httplimit.Options{
		Clock:   clock.Now,
		KeyFunc: httplimit.Keys(httplimit.KeyConst("ip"), httplimit.KeyByIP),
	})
	require.NoError(t, err)
	global, err := httplimit.New(httplimit.Window(perMinute, 3), &httplimit.Options{
		Clock:   clock.Now,
		KeyFunc: httplimit.KeyConst("global"),
	})
	require.NoError(t, err)
	h := chain(&counting{}, global.Handler, ip.Handler)

	assert.Equal(t, http.StatusOK, do(h, "/", "192.0.2.1:1").Code)
	assert.Equal(t, http.StatusOK, do(h, "/", "192.0.2.1:1").Code)
	rec := do(h, "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusTooManyRequests, rec.Code, "the per-IP limit")
	assert.Equal(t, "2", rec.Header().Get("RateLimit-Limit"), "the inner middleware's headers win")
	assert.Equal(t, http.StatusTooManyRequests, do(h, "/", "192.0.2.2:1").Code, "the global limit (3 counted)")
}

// A cost below 1 is never failed open: a cost computed from request data
// (a chunked body's Content-Length of -1) would otherwise let a client
// through uncounted at will.
func TestInvalidCostIsNotFailedOpen(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{
		Clock: clock.Now, FailOpen: true,
		Cost: func(r *http.Request) int64 { return r.ContentLength },
	})
	require.NoError(t, err)
	next := &counting{}
	h := m.Handler(next)
	for range 3 {
		r := httptest.NewRequest(http.MethodPost, "/upload", nil)
		r.ContentLength = -1
		r.RemoteAddr = "192.0.2.1:1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	}
	assert.EqualValues(t, 0, next.n.Load(), "no request with an invalid cost reached the handler")
	assert.EqualValues(t, 3, m.Errors())
}
