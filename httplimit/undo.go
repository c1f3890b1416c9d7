package httplimit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/ratedb/ratedb"
)

// Undoer is implemented by a Rater that can take a counted request back (see
// Options.Undo): *ratedb.Layered is one, and so is every Window, whose
// ratedb.Limiter has Undo. Undo takes cost back from the window res counted
// in, if it is still key's current window. Implementations are safe for
// concurrent use.
type Undoer interface {
	Undo(ctx context.Context, key string, res ratedb.Result, cost int64) error
}

var (
	_ Undoer = (*ratedb.Layered)(nil)
	_ Undoer = (*window)(nil)
)

func (w *window) Undo(ctx context.Context, key string, res ratedb.Result, cost int64) error {
	return w.lim.Undo(ctx, key, res, cost)
}

// serveUndoable passes an allowed request to next through a writer that
// records the status, then undoes the request's hit if Options.Undo says
// so. The undo runs even if the client has gone: the work is done, and the
// quota is the server's.
func (m *Middleware) serveUndoable(next http.Handler, w http.ResponseWriter, r *http.Request, key string, cost int64, res ratedb.Result) {
	sw, rw := newStatusWriter(w)
	next.ServeHTTP(rw, r)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	if !m.undo(r, status) {
		return
	}
	if err := m.undoer.Undo(context.WithoutCancel(r.Context()), key, res, cost); err != nil {
		m.errors.Add(1)
		if m.onError != nil {
			m.onError(r, err)
		}
	}
}

// statusWriter records the status of the response written through it: the
// first final status (1xx informational responses other than 101 are not
// final), or 200 at the first Write or Flush, or 101 when the handler
// hijacks the connection.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// ReadFrom copies src to the response with the underlying writer's
// ReadFrom if it has one (net/http's sends a file with sendfile), so that
// io.Copy and http.ServeContent keep their fast path; else through Write.
// As with Write, a copy that writes something records 200; one that
// copies nothing writes no status (net/http's writer, with or without
// ReadFrom, writes none either), so the handler's next WriteHeader is the
// response's.
func (w *statusWriter) ReadFrom(src io.Reader) (n int64, err error) {
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(writeOnly{w.ResponseWriter}, src)
	}
	if n > 0 && w.status == 0 {
		w.status = http.StatusOK
	}
	return n, err
}

// writeOnly hides a writer's other methods from io.Copy.
type writeOnly struct{ io.Writer }

// Unwrap returns the underlying writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// flushError sends buffered data as http.ResponseController.Flush does on
// the underlying writer, and records 200 unless the writer cannot flush
// (http.ErrNotSupported: nothing was sent). A flush that failed otherwise
// records 200 too: net/http's writers take the header as written before
// they send it (a later WriteHeader is superfluous), and under HTTP/2 a
// flush whose header reached the client reports the stream's error if the
// client has closed it since.
func (w *statusWriter) flushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if w.status == 0 && !errors.Is(err, http.ErrNotSupported) {
		w.status = http.StatusOK
	}
	return err
}

// hijack takes the connection over as http.ResponseController.Hijack does
// on the underlying writer (a WebSocket upgrade): the response is then the
// handler's own, and it is recorded as 101 (Switching Protocols) unless a
// status was written before.
func (w *statusWriter) hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return c, rw, err
}

// The optional interfaces a statusWriter passes on, each a field of a
// wrapper type below that has it only if the underlying writer has it: a
// handler that type-asserts one gets a method that works, and
// http.ResponseController gets http.ErrNotSupported (through Unwrap) where
// the server cannot do it.
type (
	flusher       struct{ sw *statusWriter }
	hijacker      struct{ sw *statusWriter }
	pusher        struct{ sw *statusWriter }
	closeNotifier struct{ sw *statusWriter }
)

// Flush sends buffered data and records 200 (see flushError).
func (f flusher) Flush() { _ = f.sw.flushError() }

// FlushError is Flush with the underlying writer's error, which
// http.ResponseController.Flush returns.
func (f flusher) FlushError() error { return f.sw.flushError() }

// Hijack takes the connection over; the response is recorded as 101.
func (h hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) { return h.sw.hijack() }

// Push pushes as the underlying writer does. A push sends no status of the
// response.
func (p pusher) Push(target string, opts *http.PushOptions) error {
	return p.sw.ResponseWriter.(http.Pusher).Push(target, opts)
}

// CloseNotify is the underlying writer's CloseNotify. http.CloseNotifier is
// deprecated (the request's context is done when the client goes), but some
// handlers and proxies still use it.
func (c closeNotifier) CloseNotify() <-chan bool {
	return c.sw.ResponseWriter.(http.CloseNotifier).CloseNotify()
}

// The statusWriter with each combination of Flusher (F), Hijacker (H),
// Pusher (P) and CloseNotifier (C). Each holds its statusWriter, which its
// fields point to, so that wrapping a writer costs one allocation whatever
// interfaces it has (a wrapper holding a *statusWriter would cost a second
// one when it became an http.ResponseWriter).
type (
	swF struct {
		statusWriter
		flusher
	}
	swH struct {
		statusWriter
		hijacker
	}
	swFH struct {
		statusWriter
		flusher
		hijacker
	}
	swP struct {
		statusWriter
		pusher
	}
	swFP struct {
		statusWriter
		flusher
		pusher
	}
	swHP struct {
		statusWriter
		hijacker
		pusher
	}
	swFHP struct {
		statusWriter
		flusher
		hijacker
		pusher
	}
	swC struct {
		statusWriter
		closeNotifier
	}
	swFC struct {
		statusWriter
		flusher
		closeNotifier
	}
	swHC struct {
		statusWriter
		hijacker
		closeNotifier
	}
	swFHC struct {
		statusWriter
		flusher
		hijacker
		closeNotifier
	}
	swPC struct {
		statusWriter
		pusher
		closeNotifier
	}
	swFPC struct {
		statusWriter
		flusher
		pusher
		closeNotifier
	}
	swHPC struct {
		statusWriter
		hijacker
		pusher
		closeNotifier
	}
	swFHPC struct {
		statusWriter
		flusher
		hijacker
		pusher
		closeNotifier
	}
)

// newStatusWriter returns a statusWriter over u, and itself wrapped in the
// type that has exactly the optional interfaces of u: http.Flusher and
// http.Hijacker when http.ResponseController can flush or hijack u (itself
// or through its Unwrap; the wrapper must then do it, to record the status
// it sends), http.Pusher and http.CloseNotifier when u has them. Every
// wrapper has ReadFrom, which works on any writer, and Unwrap. Both are
// one allocation.
func newStatusWriter(u http.ResponseWriter) (*statusWriter, http.ResponseWriter) {
	const (
		f = 1 << iota
		h
		p
		c
	)
	var has int
	if canFlush(u) {
		has |= f
	}
	if canHijack(u) {
		has |= h
	}
	if _, ok := u.(http.Pusher); ok {
		has |= p
	}
	if _, ok := u.(http.CloseNotifier); ok {
		has |= c
	}
	switch has {
	case f:
		x := &swF{statusWriter: statusWriter{ResponseWriter: u}}
		x.flusher.sw = &x.statusWriter
		return &x.statusWriter, x
	case h:
		x := &swH{statusWriter: statusWriter{ResponseWriter: u}}
		x.hijacker.sw = &x.statusWriter
		return &x.statusWriter, x
	case f | h:
		x := &swFH{statusWriter: statusWriter{ResponseWriter: u}}
		x.flusher.sw, x.hijacker.sw = &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case p:
		x := &swP{statusWriter: statusWriter{ResponseWriter: u}}
		x.pusher.sw = &x.statusWriter
		return &x.statusWriter, x
	case f | p:
		x := &swFP{statusWriter: statusWriter{ResponseWriter: u}}
		x.flusher.sw, x.pusher.sw = &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case h | p:
		x := &swHP{statusWriter: statusWriter{ResponseWriter: u}}
		x.hijacker.sw, x.pusher.sw = &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case f | h | p:
		x := &swFHP{statusWriter: statusWriter{ResponseWriter: u}}
		x.flusher.sw, x.hijacker.sw, x.pusher.sw = &x.statusWriter, &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case c:
		x := &swC{statusWriter: statusWriter{ResponseWriter: u}}
		x.closeNotifier.sw = &x.statusWriter
		return &x.statusWriter, x
	case f | c:
		x := &swFC{statusWriter: statusWriter{ResponseWriter: u}}
		x.flusher.sw, x.closeNotifier.sw = &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case h | c:
		x := &swHC{statusWriter: statusWriter{ResponseWriter: u}}
		x.hijacker.sw, x.closeNotifier.sw = &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case f | h | c:
		x := &swFHC{statusWriter: statusWriter{ResponseWriter: u}}
		x.flusher.sw, x.hijacker.sw, x.closeNotifier.sw = &x.statusWriter, &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case p | c:
		x := &swPC{statusWriter: statusWriter{ResponseWriter: u}}
		x.pusher.sw, x.closeNotifier.sw = &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case f | p | c:
		x := &swFPC{statusWriter: statusWriter{ResponseWriter: u}}
		x.flusher.sw, x.pusher.sw, x.closeNotifier.sw = &x.statusWriter, &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case h | p | c:
		x := &swHPC{statusWriter: statusWriter{ResponseWriter: u}}
		x.hijacker.sw, x.pusher.sw, x.closeNotifier.sw = &x.statusWriter, &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	case f | h | p | c:
		x := &swFHPC{statusWriter: statusWriter{ResponseWriter: u}}
		x.flusher.sw, x.hijacker.sw, x.pusher.sw, x.closeNotifier.sw = &x.statusWriter, &x.statusWriter, &x.statusWriter, &x.statusWriter
		return &x.statusWriter, x
	}
	sw := &statusWriter{ResponseWriter: u}
	return sw, sw
}

// maxUnwrap bounds the chain of Unwrap methods canFlush and canHijack
// follow, so that a writer whose Unwrap loops cannot hang every request.
const maxUnwrap = 64

// canFlush reports whether http.ResponseController can flush u.
func canFlush(u http.ResponseWriter) bool {
	for range maxUnwrap {
		switch t := u.(type) {
		case interface{ FlushError() error }, http.Flusher:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			u = t.Unwrap()
		default:
			return false
		}
	}
	return false
}

// canHijack reports whether http.ResponseController can hijack u.
func canHijack(u http.ResponseWriter) bool {
	for range maxUnwrap {
		switch t := u.(type) {
		case http.Hijacker:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			u = t.Unwrap()
		default:
			return false
		}
	}
	return false
}
