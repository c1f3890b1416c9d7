package httplimit_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/ratedb/ratedb/httplimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A client that half-closes its connection after sending a request (an
// HTTP/1.0-style client, or one that shuts its write side down) still
// reads the response, but net/http cancels the request's context as soon
// as it reads EOF. A Rater that fails because of that context cannot have
// allowed the request: it must not be answered 200 with an empty body,
// which net/http sends for a handler that writes nothing, as if next had
// served it. It gets OnUnavailable, and is not counted in Errors.
func TestCancelledContextIsNotAnswered200(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	for _, failOpen := range []bool{false, true} {
		next := &counting{}
		m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), &httplimit.Options{
			Clock:    clock.Now,
			FailOpen: failOpen,
			// Wait for the server to cancel the context, so that the limiter
			// sees it cancelled.
			KeyFunc: func(r *http.Request) (string, error) {
				<-r.Context().Done()
				return httplimit.KeyByIP(r)
			},
		})
		require.NoError(t, err)
		srv := httptest.NewServer(m.Handler(next))

		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		require.NoError(t, err)
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		_ = resp.Body.Close()
		_ = c.Close()
		srv.Close()

		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "FailOpen %v", failOpen)
		assert.Zero(t, next.n.Load(), "FailOpen %v", failOpen)
		assert.Zero(t, m.Errors(), "FailOpen %v", failOpen)
	}
}

// A KeyFunc that fails because the request's context was cancelled (one
// that looks the key up with r.Context()) is treated as the Rater is: the
// client left, so the request gets OnUnavailable, even with FailOpen, and is
// neither counted in Errors nor passed to OnError.
func TestKeyFuncCancelledContextIsNotAnError(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	for _, failOpen := range []bool{false, true} {
		next := &counting{}
		var onError atomic.Int64
		m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 10), &httplimit.Options{
			Clock:    clock.Now,
			FailOpen: failOpen,
			KeyFunc: func(r *http.Request) (string, error) {
				if err := r.Context().Err(); err != nil {
					return "", fmt.Errorf("key lookup: %w", err)
				}
				return "k", nil
			},
			OnError: func(*http.Request, error) { onError.Add(1) },
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := httptest.NewRecorder()
		m.Handler(next).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))

		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "FailOpen %v", failOpen)
		assert.Zero(t, next.n.Load(), "FailOpen %v", failOpen)
		assert.Zero(t, m.Errors(), "FailOpen %v", failOpen)
		assert.Zero(t, onError.Load(), "FailOpen %v", failOpen)
	}
}
