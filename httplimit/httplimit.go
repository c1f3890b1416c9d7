package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/ratedb/ratedb"
)

// Options configures a Middleware. The zero value of every field selects
// its default; pass nil to New for all defaults. New copies the Options:
// changing them afterwards has no effect. The middleware calls its
// functions and handlers on the goroutine of each request, so concurrently:
// they must be safe for concurrent use.
type Options struct {
	// KeyFunc returns the key of a request; requests with the same key share
	// a quota. Default KeyByIP: the direct peer's address, IPv6 folded to
	// its /64. Behind a reverse proxy use KeyByClientIP.
	KeyFunc KeyFunc

	// Cost returns how many units of the quota a request takes, for
	// endpoints that weigh more than others. Default: every request costs 1.
	// A cost below 1 is a programming error: the request gets
	// OnUnavailable with ErrInvalidCost (counted in Errors and passed to
	// OnError), even with FailOpen, since a cost computed from request data
	// (a Content-Length of -1, a count parameter) would otherwise let a
	// client through uncounted at will (use Exempt to let a request through
	// uncounted). A cost above the limit never fits and is always denied.
	Cost func(r *http.Request) int64

	// Exempt reports whether a request bypasses the limiter: it is neither
	// counted nor checked and gets no rate-limit headers. Default: no
	// request is exempt. Exempt runs before KeyFunc and Cost.
	Exempt func(r *http.Request) bool

	// OnLimited writes the response to a request over its quota. When it is
	// called the RateLimit headers and Retry-After are already set on the
	// response (read them from w.Header() to build a body). Default: status
	// 429 with the body "Too Many Requests".
	OnLimited http.Handler

	// OnNoKey writes the response to a request whose KeyFunc returned
	// ErrNoKey (or an empty key), such as a missing API-key header. Default:
	// status 400 with the body "Bad Request".
	OnNoKey http.Handler

	// OnUnavailable writes the response when no decision could be made (the
	// limiter, the KeyFunc or Cost failed) and FailOpen is false, and, even
	// with FailOpen, when the decision failed because the request's context
	// was cancelled (its client went away, or closed its side of the
	// connection, before the KeyFunc or the Rater could decide: their error
	// matches context.Canceled; not counted in Middleware.Errors nor passed
	// to OnError).
	// Default: status 503 with the body "Service Unavailable". The error is
	// not passed on, so that its text cannot reach the client; use OnError
	// to see it.
	OnUnavailable http.Handler

	// OnError, if set, is called with every error counted by
	// Middleware.Errors, for logging and metrics: before the response is
	// written or the request passed on, except for a failed Undo, which is
	// reported after the handler has returned. Match the error with
	// errors.Is.
	// It must not write to the response. Errors from ratedb and from this
	// package never contain the key; errors from a custom Rater or KeyFunc
	// are passed on as they are.
	OnError func(r *http.Request, err error)

	// FailOpen lets a request through, uncounted and without rate-limit
	// headers, when no decision could be made (but not for ErrInvalidCost,
	// see Cost, nor for a request whose context was cancelled, see
	// OnUnavailable). Default false: such requests
	// get OnUnavailable. Failing open keeps the service up when the limiter
	// is down, at the price of no limit at all while it is.
	FailOpen bool

	// LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (the Unix time in seconds, rounded up, at which the
	// window ends) next to the RateLimit headers, for clients that only know
	// the older convention. Default false.
	LegacyHeaders bool

	// Clock is the time source for RateLimit-Reset of allowed requests (a
	// denial's comes from the limiter's RetryAfter, as Retry-After does).
	// Default: the wall time at New plus Go's monotonic time since, as the
	// DB's default clock reads, so that a step of the wall clock changes
	// neither. If the limiter's DB has an injected clock
	// (ratedb.Options.Clock), pass the same one.
	Clock func() time.Time

	// Undo reports, once the handler has returned, whether an allowed
	// request should not count after all, given the status code the handler
	// wrote (200 if it wrote none). For example a login endpoint that limits
	// failed attempts only:
	//
	//	Undo: func(_ *http.Request, status int) bool { return status < 400 }
	//
	// The request's cost is taken back with the Rater's Undo (see Undoer),
	// from the window it counted in only: a window that has ended since
	// keeps its count. The response already went out with the headers of
	// the counted request. A handler that panics is not undone. An Undo
	// that fails is an error like any other (Middleware.Errors, OnError);
	// the request then stays counted. Default nil: every allowed request
	// counts. New fails if Undo is set and the Rater is not an Undoer.
	//
	// With Undo set, the handler gets a ResponseWriter that records the
	// status. It has the optional interfaces of the server's writer and no
	// others: http.Flusher (with FlushError) and http.Hijacker when
	// http.ResponseController can flush or hijack the server's writer
	// (HTTP/2 has no Hijack, httptest.ResponseRecorder no Hijack either),
	// http.Pusher and http.CloseNotifier when the server's writer has them;
	// and always ReadFrom and Unwrap, through which
	// http.ResponseController reaches the rest (deadlines, full duplex) and
	// reports http.ErrNotSupported for what the server cannot do. A
	// handler that hijacks the connection (a WebSocket upgrade) is reported
	// as 101, so a status < 400 rule gives upgrades back; test for 101 to
	// keep counting them.
	Undo func(r *http.Request, status int) bool
}

// Middleware limits the rate of HTTP requests with a Rater. Its Handler
// method is the middleware itself, a func(http.Handler) http.Handler that
// net/http and routers such as chi (r.Use(m.Handler)) accept.
//
// A Middleware is safe for concurrent use.
type Middleware struct {
	rater         Rater
	key           KeyFunc
	cost          func(*http.Request) int64
	exempt        func(*http.Request) bool
	onLimited     http.Handler
	onNoKey       http.Handler
	onUnavailable http.Handler
	onError       func(*http.Request, error)
	failOpen      bool
	legacy        bool
	clock         func() time.Time
	undo          func(*http.Request, int) bool
	undoer        Undoer // the Rater, when undo is set

	errors atomic.Uint64
}

// New returns a middleware that limits requests with r: a *ratedb.Layered,
// or a single window adapted by Window. opts may be nil for the defaults.
// It returns an error wrapping ratedb.ErrInvalidArgument, as ratedb.Open
// and redisstore.New do for what they are given, for a nil r, a Window with
// a nil limiter or a negative limit, or Options.Undo set with an r that is
// not an Undoer.
func New(r Rater, opts *Options) (*Middleware, error) {
	if err := validate(r); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	m := &Middleware{
		rater:         r,
		key:           o.KeyFunc,
		cost:          o.Cost,
		exempt:        o.Exempt,
		onLimited:     o.OnLimited,
		onNoKey:       o.OnNoKey,
		onUnavailable: o.OnUnavailable,
		onError:       o.OnError,
		failOpen:      o.FailOpen,
		legacy:        o.LegacyHeaders,
		clock:         o.Clock,
		undo:          o.Undo,
	}
	if m.undo != nil {
		u, ok := r.(Undoer)
		if !ok {
			return nil, fmt.Errorf("%w: httplimit: Options.Undo needs a Rater with an Undo method (an Undoer); %T has none", ratedb.ErrInvalidArgument, r)
		}
		m.undoer = u
	}
	if m.key == nil {
		m.key = KeyByIP
	}
	if m.onLimited == nil {
		m.onLimited = statusHandler(http.StatusTooManyRequests)
	}
	if m.onNoKey == nil {
		m.onNoKey = statusHandler(http.StatusBadRequest)
	}
	if m.onUnavailable == nil {
		m.onUnavailable = statusHandler(http.StatusServiceUnavailable)
	}
	if m.clock == nil {
		m.clock = steadyClock()
	}
	return m, nil
}

func validate(r Rater) error {
	switch v := r.(type) {
	case nil:
		return fmt.Errorf("%w: httplimit: nil Rater", ratedb.ErrInvalidArgument)
	case *ratedb.Layered:
		if v == nil {
			return fmt.Errorf("%w: httplimit: nil *ratedb.Layered", ratedb.ErrInvalidArgument)
		}
	case *window:
		return v.validate()
	}
	if v := reflect.ValueOf(r); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("%w: httplimit: nil %T", ratedb.ErrInvalidArgument, r) // a nil *redisstore.Layered, say
	}
	return nil
}

// statusHandler writes code with its status text as the body.
func statusHandler(code int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, http.StatusText(code), code)
	})
}

// Handler wraps next: every request that is not exempt is checked against
// its quota and counted; allowed requests reach next with the RateLimit
// headers set, denied ones get OnLimited. It panics if next is nil.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("httplimit: nil handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(next, w, r)
	})
}

// Errors returns how many errors the middleware met since New: requests
// that could not be decided (errors from the Rater, from the KeyFunc other
// than ErrNoKey, and invalid costs) and, with Options.Undo, undos that
// failed. Requests abandoned by their client before the KeyFunc or the
// Rater could decide (their error matches context.Canceled and the
// request's context is cancelled) are not counted: they get
// Options.OnUnavailable.
func (m *Middleware) Errors() uint64 { return m.errors.Load() }

func (m *Middleware) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	if m.exempt != nil && m.exempt(r) {
		next.ServeHTTP(w, r)
		return
	}
	key, cost, res, err := m.decide(r)
	now := m.clock() // after the decision: the time left is measured from it
	switch {
	case err == nil:
	case errors.Is(err, ErrNoKey):
		m.onNoKey.ServeHTTP(w, r)
		return
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client is gone, or has only closed its side of the connection
		// (net/http cancels the context at EOF) and still reads: answer it
		// as undecided, since net/http sends 200 for a handler that writes
		// nothing. Not next, even with FailOpen: the request was not let
		// through by the limiter (a Redis Rater may even have counted it), and
		// a client could half-close every request to go unlimited.
		m.onUnavailable.ServeHTTP(w, r)
		return
	default:
		m.errors.Add(1)
		if m.onError != nil {
			m.onError(r, err)
		}
		if m.failOpen && !errors.Is(err, ErrInvalidCost) {
			next.ServeHTTP(w, r)
		} else {
			m.onUnavailable.ServeHTTP(w, r)
		}
		return
	}
	h := w.Header()
	setHeaders(h, &res, now, m.legacy)
	if !res.Allowed {
		h.Set("Retry-After", formatInt(retryAfterSeconds(res.RetryAfter)))
		m.onLimited.ServeHTTP(w, r)
		return
	}
	if m.undo != nil {
		m.serveUndoable(next, w, r, key, cost, res)
		return
	}
	next.ServeHTTP(w, r)
}

// decide computes the request's key and cost and asks the Rater. It
// returns the key as stored (see storeKey) and the cost with the Result.
func (m *Middleware) decide(r *http.Request) (string, int64, ratedb.Result, error) {
	key, err := m.key(r)
	if err != nil {
		return "", 0, ratedb.Result{}, err
	}
	if key == "" {
		return "", 0, ratedb.Result{}, ErrNoKey
	}
	cost := int64(1)
	if m.cost != nil {
		if cost = m.cost(r); cost < 1 {
			return "", 0, ratedb.Result{}, fmt.Errorf("%w: %d", ErrInvalidCost, cost)
		}
	}
	key = storeKey(key)
	res, err := m.rater.Hit(r.Context(), key, cost)
	return key, cost, res, err
}

// steadyClock returns a clock that reads the wall time now plus Go's
// monotonic time since: it follows no step of the wall clock, as the DB's
// default clock does not.
func steadyClock() func() time.Time {
	start := time.Now()
	return func() time.Time { return start.Add(time.Since(start)) }
}
