package httplimit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/httplimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowRater is a Rater whose decision takes d of the shared clock, as a
// Redis round trip or a busy store does.
type slowRater struct {
	clock *fakeClock
	d     time.Duration
	r     httplimit.Rater
}

func (s slowRater) Hit(ctx context.Context, key string, cost int64) (ratedb.Result, error) {
	s.clock.Set(s.clock.Now().Add(s.d))
	return s.r.Hit(ctx, key, cost)
}

// RateLimit-Reset of an allowed request never exceeds its window's length
// (RateLimit-Policy's w), and is the time left after the decision: a
// decision that crosses a window boundary is counted in the new window.
// The middleware and the DB share one injected clock, as Options.Clock asks.
func TestResetNotLongerThanWindowAcrossBoundary(t *testing.T) {
	minute := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := newClock(minute.Add(59900 * time.Millisecond)) // 0.1 s left in the minute
	db := openDB(t, clock)
	r := slowRater{clock: clock, d: 200 * time.Millisecond, r: httplimit.Window(fixedMinute(t, db), 10)}
	m, err := httplimit.New(r, &httplimit.Options{Clock: clock.Now})
	require.NoError(t, err)
	rec := do(m.Handler(&counting{}), "/", "192.0.2.1:1")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "10;w=60", rec.Header().Get("RateLimit-Policy"))
	// The hit counted in the window [12:01:00, 12:02:00); the response goes
	// out at 12:01:00.1: 59.9 s left, rounded up.
	assert.Equal(t, "60", rec.Header().Get("RateLimit-Reset"))
}

// With a store whose clock differs from the middleware's (redisstore's
// default ServerClock reads Redis's TIME; the middleware reads the host's),
// RateLimit-Reset still never claims more than a window's length.
func TestResetBoundedWhenStoreClockDiffers(t *testing.T) {
	store := newClock(t0) // 39.7 s left in the store's minute
	db := openDB(t, store)
	host := func() time.Time { return store.Now().Add(-2 * time.Minute) } // host clock 2 min behind
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), &httplimit.Options{Clock: host})
	require.NoError(t, err)
	rec := do(m.Handler(&counting{}), "/", "192.0.2.1:1")
	require.Equal(t, http.StatusOK, rec.Code)
	reset, err := strconv.Atoi(rec.Header().Get("RateLimit-Reset"))
	require.NoError(t, err)
	assert.LessOrEqual(t, reset, 60, "RateLimit-Reset %d s for a 60 s window (policy %q)", reset, rec.Header().Get("RateLimit-Policy"))
}

// pushWriter is an HTTP/2-like ResponseWriter that can push.
type pushWriter struct {
	plainWriter
	pushed []string
}

func (w *pushWriter) Push(target string, _ *http.PushOptions) error {
	w.pushed = append(w.pushed, target)
	return nil
}

// Setting Options.Undo must not take http.Pusher away from the handler:
// without Undo the handler can push, with Undo it silently cannot.
func TestUndoKeepsPusher(t *testing.T) {
	for _, undo := range []bool{false, true} {
		clock := newClock(t0)
		db := openDB(t, clock)
		o := &httplimit.Options{Clock: clock.Now}
		if undo {
			o.Undo = func(*http.Request, int) bool { return false }
		}
		m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), o)
		require.NoError(t, err)
		h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if p, ok := w.(http.Pusher); ok {
				_ = p.Push("/style.css", nil)
			}
			w.WriteHeader(http.StatusOK)
		}))
		pw := &pushWriter{plainWriter: plainWriter{h: http.Header{}}}
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "192.0.2.1:1"
		h.ServeHTTP(pw, r)
		assert.Equal(t, []string{"/style.css"}, pw.pushed, "Undo set: %v", undo)
	}
}

// readFromWriter is a plainWriter with io.ReaderFrom, as net/http's
// writer has (it sends a file with sendfile).
type readFromWriter struct {
	plainWriter
	readFrom int64
}

func (w *readFromWriter) ReadFrom(src io.Reader) (int64, error) {
	w.WriteHeader(http.StatusOK)
	n, err := io.Copy(io.Discard, src)
	w.readFrom += n
	return n, err
}

// Setting Options.Undo must not take io.ReaderFrom away from the handler:
// io.Copy to the response (http.ServeContent, a file) keeps the underlying
// writer's fast path, and the status it implies is the one Undo sees.
func TestUndoKeepsReaderFrom(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	var seen int
	o := &httplimit.Options{Clock: clock.Now, Undo: func(_ *http.Request, status int) bool { seen = status; return false }}
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), o)
	require.NoError(t, err)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// A reader without WriteTo, as a file's is to io.Copy.
		_, _ = io.Copy(w, struct{ io.Reader }{strings.NewReader("body")})
	}))
	rw := &readFromWriter{plainWriter: plainWriter{h: http.Header{}}}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	h.ServeHTTP(rw, r)
	assert.Equal(t, int64(4), rw.readFrom, "the copy went through the underlying ReadFrom")
	assert.Equal(t, http.StatusOK, seen)
}

// Over a writer without ReadFrom (HTTP/2's, or another middleware's), an
// io.Copy that copies nothing writes nothing: the status is still the one
// the handler writes next, as with Write, not 200.
func TestUndoReadFromOfNothingWritesNoStatus(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	var seen int
	o := &httplimit.Options{Clock: clock.Now, Undo: func(_ *http.Request, status int) bool { seen = status; return false }}
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), o)
	require.NoError(t, err)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.Copy(w, struct{ io.Reader }{strings.NewReader("")})
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	rw := &plainWriter{h: http.Header{}}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	h.ServeHTTP(rw, r)
	assert.Equal(t, http.StatusServiceUnavailable, rw.status, "the response's status")
	assert.Equal(t, http.StatusServiceUnavailable, seen, "the status Undo sees")
}

// The same through net/http's own writer, which has ReadFrom: an empty copy
// writes no header there either, and the client gets the handler's 503.
func TestUndoReadFromOfNothingOverNetHTTP(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	seen := make(chan int, 1)
	o := &httplimit.Options{Clock: clock.Now, Undo: func(_ *http.Request, status int) bool { seen <- status; return false }}
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), o)
	require.NoError(t, err)
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.Copy(w, struct{ io.Reader }{strings.NewReader("")})
		w.WriteHeader(http.StatusServiceUnavailable)
	})))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the response's status")
	assert.Equal(t, http.StatusServiceUnavailable, <-seen, "the status Undo sees")
}
