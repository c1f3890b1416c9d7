package httplimit_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/httplimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// login answers 200 to the password "right" and 401 to any other.
var login = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Password") != "right" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	_, _ = w.Write([]byte("welcome"))
})

// onlyFailures undoes every request that did not fail.
func onlyFailures(_ *http.Request, status int) bool { return status < 400 }

// With Undo, a login endpoint counts failed attempts only: successful
// logins never use the quota, and the third failure exhausts it.
func TestUndoCountsOnlyFailedLogins(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 3), &httplimit.Options{Clock: clock.Now, Undo: onlyFailures})
	require.NoError(t, err)
	h := m.Handler(login)
	for i := range 10 {
		rec := do(h, "/login", "192.0.2.1:1", "Password", "right")
		require.Equal(t, http.StatusOK, rec.Code, "successful login %d", i)
	}
	for i := range 3 {
		rec := do(h, "/login", "192.0.2.1:1", "Password", "wrong")
		require.Equal(t, http.StatusUnauthorized, rec.Code, "failed login %d", i)
	}
	rec := do(h, "/login", "192.0.2.1:1", "Password", "right")
	assert.Equal(t, http.StatusTooManyRequests, rec.Code, "three failures use the quota, even for the right password")
	n, err := fixedMinute(t, db).Get(context.Background(), "192.0.2.1")
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	assert.Zero(t, m.Errors())
}

// A Layered Rater gives the request back in every tier.
func TestUndoLayered(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	l, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Minute, Limit: 5}, ratedb.Tier{Scale: time.Hour, Limit: 50})
	require.NoError(t, err)
	m, err := httplimit.New(l, &httplimit.Options{Clock: clock.Now, Undo: onlyFailures, Cost: func(*http.Request) int64 { return 2 }})
	require.NoError(t, err)
	h := m.Handler(login)
	do(h, "/", "192.0.2.1:1", "Password", "right")
	do(h, "/", "192.0.2.1:1", "Password", "wrong")
	counts, err := l.Get(context.Background(), "192.0.2.1")
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 2}, counts, "only the failure's cost of 2 stays, in both tiers")
}

// The hit is taken back only from the window it counted in: a request
// whose window ends while its handler runs leaves the next window's count
// alone.
func TestUndoLeavesTheNextWindowAlone(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	w := fixedMinute(t, db)
	m, err := httplimit.New(httplimit.Window(w, 10), &httplimit.Options{Clock: clock.Now, Undo: onlyFailures})
	require.NoError(t, err)
	h := m.Handler(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// A slow handler: the minute ends, and the same client is counted
		// in the next one meanwhile.
		clock.Set(t0.Truncate(time.Minute).Add(time.Minute + time.Second))
		_, err := w.Hit(r.Context(), "192.0.2.1", 10, 4)
		require.NoError(t, err)
		rw.WriteHeader(http.StatusNoContent)
	}))
	rec := do(h, "/", "192.0.2.1:1")
	require.Equal(t, http.StatusNoContent, rec.Code)
	n, err := w.Get(context.Background(), "192.0.2.1")
	require.NoError(t, err)
	assert.EqualValues(t, 4, n, "the undo took from a window the request was not counted in")
}

// The status Undo sees is the final one the handler wrote: 200 when it
// wrote nothing or only a body, or flushed; an informational 103 is not
// final.
func TestUndoSeesTheFinalStatus(t *testing.T) {
	for name, tc := range map[string]struct {
		h    http.HandlerFunc
		want int
	}{
		"nothing": {func(http.ResponseWriter, *http.Request) {}, http.StatusOK},
		"a body":  {func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("x")) }, http.StatusOK},
		"a status then a body": {func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte("x"))
		}, http.StatusTeapot},
		"early hints then 500": {func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusInternalServerError)
		}, http.StatusInternalServerError},
		// net/http sends 101 as the final status, not as an informational
		// response: the connection then speaks another protocol.
		"switching protocols then 500": {func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusSwitchingProtocols)
			w.WriteHeader(http.StatusInternalServerError) // superfluous
		}, http.StatusSwitchingProtocols},
		"a flush through ResponseController": {func(w http.ResponseWriter, _ *http.Request) {
			require.NoError(t, http.NewResponseController(w).Flush())
			w.WriteHeader(http.StatusBadGateway) // too late: the flush sent 200
		}, http.StatusOK},
		"a flush through http.Flusher": {func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush()
		}, http.StatusOK},
	} {
		t.Run(name, func(t *testing.T) {
			clock := newClock(t0)
			db := openDB(t, clock)
			got := 0
			m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), &httplimit.Options{
				Clock: clock.Now,
				Undo:  func(_ *http.Request, status int) bool { got = status; return false },
			})
			require.NoError(t, err)
			do(m.Handler(tc.h), "/", "192.0.2.1:1")
			assert.Equal(t, tc.want, got)
		})
	}
}

// undoFails is a Rater whose hits succeed and whose undos fail.
type undoFails struct{ err error }

func (u undoFails) Hit(context.Context, string, int64) (ratedb.Result, error) {
	return ratedb.Result{Allowed: true, Limit: 1, Remaining: 1, ResetAt: t0.Add(time.Minute), Scale: time.Minute}, nil
}

func (u undoFails) Undo(context.Context, string, ratedb.Result, int64) error { return u.err }

// A failed undo is an error of the middleware: counted, passed to OnError,
// and the response stands. The undo runs with a context the client's
// leaving does not cancel.
func TestUndoErrors(t *testing.T) {
	boom := errors.New("store down")
	var got error
	m, err := httplimit.New(undoFails{boom}, &httplimit.Options{
		Clock: newClock(t0).Now, Undo: onlyFailures, OnError: func(_ *http.Request, err error) { got = err },
	})
	require.NoError(t, err)
	rec := do(m.Handler(&counting{}), "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.ErrorIs(t, got, boom)
	assert.EqualValues(t, 1, m.Errors())

	// The client is gone by the time the handler returns.
	clock := newClock(t0)
	db := openDB(t, clock)
	w := fixedMinute(t, db)
	m, err = httplimit.New(httplimit.Window(w, 10), &httplimit.Options{Clock: clock.Now, Undo: onlyFailures})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	r.RemoteAddr = "192.0.2.1:1"
	m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { cancel() })).ServeHTTP(httptest.NewRecorder(), r)
	n, err := w.Get(context.Background(), "192.0.2.1")
	require.NoError(t, err)
	assert.Zero(t, n, "the undo was cancelled with the request")
	assert.Zero(t, m.Errors())
}

// New refuses Undo with a Rater that cannot undo.
func TestUndoNeedsAnUndoer(t *testing.T) {
	_, err := httplimit.New(hitOnly{}, &httplimit.Options{Undo: onlyFailures})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Undo")
	_, err = httplimit.New(hitOnly{}, nil)
	assert.NoError(t, err, "without Undo any Rater does")
}

// hitOnly is a Rater without Undo.
type hitOnly struct{}

func (hitOnly) Hit(context.Context, string, int64) (ratedb.Result, error) {
	return ratedb.Result{Allowed: true}, nil
}

// noFlushWriter is a ResponseWriter that cannot flush (nor hijack).
type noFlushWriter struct {
	h      http.Header
	status int
}

func (w *noFlushWriter) Header() http.Header { return w.h }
func (w *noFlushWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *noFlushWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}

// Through the recording writer, a flush the connection cannot do still
// reports http.ErrNotSupported (and records no status), and a hijacked
// connection, whichever way the handler takes it, is reported as 101.
func TestUndoFlushErrorsAndHijacks(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	statuses := make(chan int, 4)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), &httplimit.Options{
		Clock: clock.Now,
		Undo:  func(_ *http.Request, status int) bool { statuses <- status; return false },
	})
	require.NoError(t, err)

	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		assert.ErrorIs(t, http.NewResponseController(w).Flush(), http.ErrNotSupported)
		w.WriteHeader(http.StatusBadGateway)
	}))
	w := &noFlushWriter{h: http.Header{}}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusBadGateway, <-statuses, "the failed flush sent nothing")

	for name, hijack := range map[string]func(http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error){
		"ResponseController": func(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
			return http.NewResponseController(w).Hijack()
		},
		"http.Hijacker": func(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
			return w.(http.Hijacker).Hijack()
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				c, rw, err := hijack(w)
				if !assert.NoError(t, err) {
					return
				}
				defer c.Close()
				_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
				_ = rw.Flush()
			})))
			defer srv.Close()
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"))
			require.NoError(t, err)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			require.NoError(t, err)
			assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
			assert.Equal(t, http.StatusSwitchingProtocols, <-statuses)
		})
	}
}
