package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"path"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/logthrottle"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// Options wires a Server. Core, Rules, Keys and Logger are required.
type Options struct {
	Core  *core.Core
	Rules *rules.Manager
	Keys  *keys.Keys
	// Metrics serves /metrics; nil answers 404.
	Metrics http.Handler
	// Ready reports whether the store is usable (/readyz); nil: always.
	// /readyz logs nothing itself: anyone may ask it, so Ready logs the
	// changes of its outcome.
	Ready func(ctx context.Context) error
	// DenyStatus is the HTTP status of a Deny decision: 200 (default) or
	// 429.
	DenyStatus int
	// LogKeys allows client ids and routes in (debug) logs.
	LogKeys bool
	Logger  *slog.Logger
	// EnvoyRules, when not nil, returns the Envoy config's rules, listed
	// read-only under "envoy" in GET /v1/rules.
	EnvoyRules func() any
	// Clock is the clock of the store's windows, on which reset_in_second
	// is measured: with --redis, Redis's as followed by a
	// redisstate.Clock. Default: the wall time at New plus Go's monotonic
	// time since, which follows the embedded DB's default clock (no step
	// of the wall clock moves either).
	Clock func() time.Time
}

// Server is the HTTP handler of the service. It is safe for concurrent use.
type Server struct {
	opts  Options
	mux   *http.ServeMux
	start time.Time // wall and monotonic reading at New: see now

	storeLog logthrottle.Throttle // of the "store failed" lines
}

// local is the wall time at New plus Go's monotonic time since: like the
// embedded DB's default clock, it follows no step of the wall clock.
func (s *Server) local() time.Time { return s.start.Add(time.Since(s.start)) }

// now is the time on the store's clock: Options.Clock, else local.
func (s *Server) now() time.Time {
	if s.opts.Clock != nil {
		return s.opts.Clock()
	}
	return s.local()
}

// New returns the service's handler.
func New(opts Options) *Server {
	if opts.DenyStatus == 0 {
		opts.DenyStatus = http.StatusOK
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), start: time.Now()}
	s.storeLog.Now = s.local
	s.mux.HandleFunc("/v1/check", s.check)
	s.mux.HandleFunc("/v1/rules", s.listRules)
	s.mux.HandleFunc("/v1/rules/match", s.matchRule)
	s.mux.HandleFunc("/v1/rules/{name}", s.rule)
	s.mux.HandleFunc("/healthz", s.healthz)
	s.mux.HandleFunc("/readyz", s.readyz)
	if opts.Metrics != nil {
		s.mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				methodNotAllowed(w, "GET, HEAD")
				return
			}
			opts.Metrics.ServeHTTP(w, r)
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not found", nil)
	})
	return s
}

// ServeHTTP implements http.Handler.
//
// A path that is not clean ("/v1//check", "/v1/./check") names no endpoint:
// it is answered 404, where http.ServeMux would redirect to the clean path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p != cleanPath(p) {
		writeError(w, http.StatusNotFound, "not found", nil)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// cleanPath is p as http.ServeMux cleans it (keeping a trailing slash).
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// role is the role of the request's X-API-Key.
func (s *Server) role(r *http.Request) keys.Role {
	v := r.Header["X-Api-Key"]
	if len(v) != 1 {
		return keys.None
	}
	return s.opts.Keys.Role(v[0])
}

// admin reports whether the request carries an admin key, answering 401 or
// 403 if not.
func (s *Server) admin(w http.ResponseWriter, r *http.Request) bool {
	switch s.role(r) {
	case keys.Admin:
		return true
	case keys.Client:
		writeError(w, http.StatusForbidden, "this API needs an admin key", nil)
	default:
		writeError(w, http.StatusUnauthorized, "missing or unknown API key (X-API-Key)", nil)
	}
	return false
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "up"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	if s.opts.Ready != nil {
		if err := s.opts.Ready(r.Context()); err != nil {
			writeError(w, http.StatusServiceUnavailable, "the store is not usable", nil)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
