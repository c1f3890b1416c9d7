package httplimit_test

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/ratedb/ratedb/httplimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callWriter is a ResponseWriter without optional interfaces that records
// the calls of the ones its wrappers below add.
type callWriter struct {
	plainWriter
	calls []string
}

type (
	withFlush     struct{ w *callWriter }
	withHijack    struct{ w *callWriter }
	withPush      struct{ w *callWriter }
	withCloseNote struct{ w *callWriter }
)

func (f withFlush) Flush() {
	f.w.calls = append(f.w.calls, "Flush")
	f.w.WriteHeader(http.StatusOK)
}

var errTestHijack = errors.New("test writer: hijacked")

func (h withHijack) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.w.calls = append(h.w.calls, "Hijack")
	return nil, nil, errTestHijack
}

func (p withPush) Push(string, *http.PushOptions) error {
	p.w.calls = append(p.w.calls, "Push")
	return nil
}

func (c withCloseNote) CloseNotify() <-chan bool {
	c.w.calls = append(c.w.calls, "CloseNotify")
	return make(chan bool)
}

// optional lists the optional interfaces of w the middleware may pass on.
func optional(w http.ResponseWriter) (names []string) {
	if _, ok := w.(http.Flusher); ok {
		names = append(names, "Flush")
	}
	if _, ok := w.(http.Hijacker); ok {
		names = append(names, "Hijack")
	}
	if _, ok := w.(http.Pusher); ok {
		names = append(names, "Push")
	}
	if _, ok := w.(http.CloseNotifier); ok {
		names = append(names, "CloseNotify")
	}
	return names
}

// useOptional calls every optional method w has, in optional's order.
func useOptional(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if h, ok := w.(http.Hijacker); ok {
		_, _, _ = h.Hijack()
	}
	if p, ok := w.(http.Pusher); ok {
		_ = p.Push("/style.css", nil)
	}
	if c, ok := w.(http.CloseNotifier); ok {
		_ = c.CloseNotify()
	}
}

// undoMiddleware returns a middleware with Undo set that sends the status
// Undo sees to statuses.
func undoMiddleware(t *testing.T, statuses chan<- int) *httplimit.Middleware {
	t.Helper()
	clock := newClock(t0)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, openDB(t, clock)), 100), &httplimit.Options{
		Clock: clock.Now,
		Undo:  func(_ *http.Request, status int) bool { statuses <- status; return false },
	})
	require.NoError(t, err)
	return m
}

// With Undo, the handler's writer has exactly the optional interfaces of
// the server's, for every combination of them, and each one it has reaches
// the server's method. A handler that type-asserts an interface the server
// lacks does not get one that fails or does nothing.
// writerCombos are the server's writers with each combination of the
// optional interfaces, by their letters (Flush, Hijack, Push,
// CloseNotify), and the names of those interfaces.
var writerCombos = map[string]struct {
	wrap func(*callWriter) http.ResponseWriter
	want []string
}{
	"none": {func(w *callWriter) http.ResponseWriter { return w }, nil},
	"F": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withFlush
		}{w, withFlush{w}}
	}, []string{"Flush"}},
	"H": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withHijack
		}{w, withHijack{w}}
	}, []string{"Hijack"}},
	"FH": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withFlush
			withHijack
		}{w, withFlush{w}, withHijack{w}}
	}, []string{"Flush", "Hijack"}},
	"P": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withPush
		}{w, withPush{w}}
	}, []string{"Push"}},
	"FP": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withFlush
			withPush
		}{w, withFlush{w}, withPush{w}}
	}, []string{"Flush", "Push"}},
	"HP": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withHijack
			withPush
		}{w, withHijack{w}, withPush{w}}
	}, []string{"Hijack", "Push"}},
	"FHP": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withFlush
			withHijack
			withPush
		}{w, withFlush{w}, withHijack{w}, withPush{w}}
	}, []string{"Flush", "Hijack", "Push"}},
	"C": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withCloseNote
		}{w, withCloseNote{w}}
	}, []string{"CloseNotify"}},
	"FC": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withFlush
			withCloseNote
		}{w, withFlush{w}, withCloseNote{w}}
	}, []string{"Flush", "CloseNotify"}},
	"HC": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withHijack
			withCloseNote
		}{w, withHijack{w}, withCloseNote{w}}
	}, []string{"Hijack", "CloseNotify"}},
	"FHC": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withFlush
			withHijack
			withCloseNote
		}{w, withFlush{w}, withHijack{w}, withCloseNote{w}}
	}, []string{"Flush", "Hijack", "CloseNotify"}},
	"PC": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withPush
			withCloseNote
		}{w, withPush{w}, withCloseNote{w}}
	}, []string{"Push", "CloseNotify"}},
	"FPC": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withFlush
			withPush
			withCloseNote
		}{w, withFlush{w}, withPush{w}, withCloseNote{w}}
	}, []string{"Flush", "Push", "CloseNotify"}},
	"HPC": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withHijack
			withPush
			withCloseNote
		}{w, withHijack{w}, withPush{w}, withCloseNote{w}}
	}, []string{"Hijack", "Push", "CloseNotify"}},
	"FHPC": {func(w *callWriter) http.ResponseWriter {
		return struct {
			*callWriter
			withFlush
			withHijack
			withPush
			withCloseNote
		}{w, withFlush{w}, withHijack{w}, withPush{w}, withCloseNote{w}}
	}, []string{"Flush", "Hijack", "Push", "CloseNotify"}},
}

func TestUndoWriterHasTheServersInterfaces(t *testing.T) {
	for name, tc := range writerCombos {
		t.Run(name, func(t *testing.T) {
			statuses := make(chan int, 1)
			m := undoMiddleware(t, statuses)
			var got []string
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				got = optional(w)
				useOptional(w)
				rc := http.NewResponseController(w)
				if !assert.ObjectsAreEqual(tc.want, got) {
					return
				}
				if len(got) == 0 || got[0] != "Flush" {
					assert.ErrorIs(t, rc.Flush(), http.ErrNotSupported, "ResponseController.Flush")
				}
				if _, _, err := rc.Hijack(); !slices.Contains(got, "Hijack") {
					assert.ErrorIs(t, err, http.ErrNotSupported, "ResponseController.Hijack")
				} else {
					assert.ErrorIs(t, err, errTestHijack, "ResponseController.Hijack")
				}
				w.WriteHeader(http.StatusUnauthorized)
			}))
			cw := &callWriter{plainWriter: plainWriter{h: http.Header{}}}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = "192.0.2.1:1"
			h.ServeHTTP(tc.wrap(cw), r)
			require.Equal(t, tc.want, got, "the handler's optional interfaces")
			want := append([]string(nil), tc.want...)
			if slices.Contains(tc.want, "Hijack") {
				want = append(want, "Hijack") // again, by the ResponseController
			}
			assert.Equal(t, want, cw.calls, "the server's methods called")
			wantStatus := http.StatusUnauthorized
			if slices.Contains(tc.want, "Flush") {
				wantStatus = http.StatusOK // sent by the flush
			}
			assert.Equal(t, wantStatus, cw.status, "the response's status")
			assert.Equal(t, wantStatus, <-statuses, "the status Undo sees")
		})
	}
}

// With Undo, passing on the server's optional interfaces costs no
// allocation per request beyond the one of a writer that has none, for
// every combination of them (each wrapper holding a pointer to the status
// writer cost one more).
func TestUndoWriterAllocatesTheSameForEveryCombination(t *testing.T) {
	clock := newClock(t0)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, openDB(t, clock)), 1<<40), &httplimit.Options{
		Clock: clock.Now,
		Undo:  func(*http.Request, int) bool { return false },
	})
	require.NoError(t, err)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	allocs := func(wrap func(*callWriter) http.ResponseWriter) float64 {
		w := wrap(&callWriter{plainWriter: plainWriter{h: http.Header{}}})
		return testing.AllocsPerRun(100, func() { h.ServeHTTP(w, r) })
	}
	none := allocs(writerCombos["none"].wrap)
	for name, tc := range writerCombos {
		assert.Equal(t, none, allocs(tc.wrap), "allocations per request with %s", name)
	}
}

// unwrapOnly is another middleware's writer that has no optional method
// but Unwrap, through which http.ResponseController reaches the server's.
type unwrapOnly struct{ http.ResponseWriter }

func (u unwrapOnly) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// Flush and Hijack that http.ResponseController finds through the
// writer's Unwrap are the wrapper's own, so that it records the status they
// send; Push and CloseNotify, which ResponseController does not reach, are
// passed on only when the writer itself has them. Two middlewares with Undo
// nested pass on what the server's writer has, no more.
func TestUndoWriterThroughUnwrapAndNested(t *testing.T) {
	statuses := make(chan int, 2)
	m := undoMiddleware(t, statuses)
	var got []string
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got = optional(w)
		require.NoError(t, http.NewResponseController(w).Flush())
		w.WriteHeader(http.StatusUnauthorized) // too late: the flush sent 200
	}))
	cw := &callWriter{plainWriter: plainWriter{h: http.Header{}}}
	server := struct {
		*callWriter
		withFlush
		withHijack
		withPush
		withCloseNote
	}{cw, withFlush{cw}, withHijack{cw}, withPush{cw}, withCloseNote{cw}}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	h.ServeHTTP(unwrapOnly{server}, r)
	assert.Equal(t, []string{"Flush", "Hijack"}, got)
	assert.Equal(t, []string{"Flush"}, cw.calls)
	assert.Equal(t, http.StatusOK, <-statuses, "the flush through Unwrap is recorded")

	outer := undoMiddleware(t, statuses)
	got = []string{"not called"}
	h = outer.Handler(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got = optional(w)
		assert.ErrorIs(t, http.NewResponseController(w).Flush(), http.ErrNotSupported)
		w.WriteHeader(http.StatusUnauthorized)
	})))
	h.ServeHTTP(&plainWriter{h: http.Header{}}, r)
	assert.Empty(t, got, "nested over a writer without optional interfaces")
	assert.Equal(t, http.StatusUnauthorized, <-statuses)
	assert.Equal(t, http.StatusUnauthorized, <-statuses)
}

// Over net/http's own writers, the handler gets what the server offers:
// Flush, Hijack and CloseNotify over HTTP/1.1, Flush, Push and CloseNotify
// over HTTP/2.
func TestUndoWriterOverRealServers(t *testing.T) {
	for name, tc := range map[string]struct {
		http2 bool
		want  []string
	}{
		"HTTP/1.1": {false, []string{"Flush", "Hijack", "CloseNotify"}},
		"HTTP/2":   {true, []string{"Flush", "Push", "CloseNotify"}},
	} {
		t.Run(name, func(t *testing.T) {
			statuses := make(chan int, 1)
			m := undoMiddleware(t, statuses)
			type seen struct {
				direct, wrapped []string
				proto           int
			}
			seenc := make(chan seen, 1)
			srv := httptest.NewUnstartedServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s := seen{wrapped: optional(w), proto: r.ProtoMajor}
				if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); ok {
					s.direct = optional(u.Unwrap())
				}
				seenc <- s
				w.(http.Flusher).Flush()
				w.WriteHeader(http.StatusUnauthorized) // too late
			})))
			srv.EnableHTTP2 = tc.http2
			srv.StartTLS()
			defer srv.Close()
			resp, err := srv.Client().Get(srv.URL)
			require.NoError(t, err)
			_ = resp.Body.Close()
			s := <-seenc
			require.Equal(t, map[bool]int{false: 1, true: 2}[tc.http2], s.proto)
			assert.Equal(t, tc.want, s.direct, "the server's writer")
			assert.Equal(t, tc.want, s.wrapped, "the handler's writer")
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, http.StatusOK, <-statuses, "the flush is recorded")
		})
	}
}

// failingFlushWriter is a writer whose flush sends the header, as
// net/http's do, and then reports an error: under HTTP/2, the stream's
// error when the client closed it after the header reached it.
type failingFlushWriter struct{ plainWriter }

func (w *failingFlushWriter) FlushError() error {
	w.WriteHeader(http.StatusOK)
	return errors.New("client disconnected")
}

// A flush that sent the header and then failed is recorded as 200, what
// the client got: the handler's later WriteHeader is superfluous, and Undo
// must not see it (under HTTP/2 this raced: TestUndoWriterOverRealServers
// saw 401 when the client's reset came before the flush returned). A flush
// the writer cannot do records nothing (TestUndoFlushErrorsAndHijacks).
func TestFailedFlushRecordsWhatWasSent(t *testing.T) {
	statuses := make(chan int, 1)
	h := undoMiddleware(t, statuses).Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		assert.Error(t, http.NewResponseController(w).Flush())
		w.WriteHeader(http.StatusUnauthorized)
	}))
	w := &failingFlushWriter{plainWriter{h: http.Header{}}}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.status, "the client got 200")
	assert.Equal(t, http.StatusOK, <-statuses)
}
