package httplimit

import (
	"bufio"
	"context"
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
	sw := &statusWriter{ResponseWriter: w}
	var rw http.ResponseWriter = sw
	if _, ok := w.(http.Pusher); ok {
		rw = pushStatusWriter{sw} // keep server push (HTTP/2)
	}
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

// Flush sends buffered data, as the underlying writer's Flush does (if it
// has none, nothing happens, and no status is recorded: the handler's next
// WriteHeader is the response's).
func (w *statusWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush with the underlying writer's error, which
// http.ResponseController.Flush returns (http.ErrNotSupported included).
func (w *statusWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if err == nil && w.status == 0 {
		w.status = http.StatusOK
	}
	return err
}

// Hijack takes the connection over (a WebSocket upgrade): the response is
// then the handler's own, and it is recorded as 101 (Switching Protocols)
// unless a status was written before.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return c, rw, err
}

// pushStatusWriter is a statusWriter over a writer that can push: it is an
// http.Pusher too. A push sends no status of the response.
type pushStatusWriter struct{ *statusWriter }

func (w pushStatusWriter) Push(target string, opts *http.PushOptions) error {
	return w.ResponseWriter.(http.Pusher).Push(target, opts)
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
