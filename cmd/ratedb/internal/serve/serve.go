package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/fileread"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/metrics"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// HTTP server limits, documented in the README.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 16 << 10
)

// Run serves until stop is closed (the first SIGTERM or SIGINT), then stops
// accepting, finishes in-flight requests, writes a final snapshot and
// returns nil. stderr receives logs and the generated development key.
func Run(c Config, stderr io.Writer, stop <-chan struct{}) error {
	if err := c.validate(); err != nil {
		return err
	}
	log := NewLogger(&c, stderr)
	limit := c.DefaultLimit
	def, err := rules.Build(rules.DefaultName, rules.Spec{
		ClientID: "*", Route: "*", Algorithm: c.DefaultAlgorithm, Limit: &limit, Window: c.DefaultWindow.String(),
	}, true)
	if err != nil {
		return fmt.Errorf("default rule (--default-limit, --default-window, --default-algorithm): %w", err)
	}
	k, err := keys.Load(keySource(c.APIKeysFile, c.APIKeysEnv, "--api-keys-file", "RATEDB_API_KEYS"),
		keySource(c.AdminKeysFile, c.AdminKeysEnv, "--admin-keys-file", "RATEDB_ADMIN_KEYS"))
	if err != nil {
		return err
	}
	var fileRules []*rules.Rule
	if c.Rules != "" {
		b, err := fileread.ReadFile(c.Rules)
		if err != nil {
			return fmt.Errorf("--rules: %w", err)
		}
		if fileRules, err = rules.ParseFile(b); err != nil {
			return fmt.Errorf("--rules %s: %w", c.Rules, err)
		}
	}

	// Read before the state is opened, as the keys and rules files are: a
	// file or config that cannot be used ends the start before anything
	// else.
	tlsConf, err := c.Envoy.loadTLS()
	if err != nil {
		return err
	}
	envoyConf, err := c.Envoy.loadConfig()
	if err != nil {
		return err
	}

	st, err := openState(&c, log)
	if err != nil {
		return err
	}
	closeDB := st.close
	rm, err := rules.NewManager(st.rules, def)
	if err != nil {
		return errors.Join(err, closeDB())
	}
	if st.checkConfig != nil {
		st.checkConfig()
	}
	if len(fileRules) > 0 {
		if _, err := rm.Import(fileRules); err != nil {
			return errors.Join(err, closeDB())
		}
		log.Info("imported rules", "file", c.Rules, "rules", len(fileRules))
	}
	m := metrics.New(st.collectors...)
	cr := core.New(st.store, core.Options{Observer: m, FailOpen: c.FailOpen, Clock: st.clock})
	// The HTTP port is bound before the gRPC server starts: an --http that
	// cannot be bound (taken by another process, or by --grpc's own
	// listener) ends the start before anything has served or been logged
	// as listening.
	ln, err := net.Listen("tcp", c.HTTP)
	if err != nil {
		return errors.Join(fmt.Errorf("--http: %w", err), closeDB())
	}
	envoy, err := startEnvoy(c.Envoy, tlsConf, envoyConf, cr, m, st.clock, log)
	if err != nil {
		_ = ln.Close() // never served: nothing to report
		return errors.Join(err, closeDB())
	}
	// Only once the ports are bound: a start that fails there printed a key
	// that never served.
	switch {
	case k.HasClientKeys():
	case k.HasAdminKeys():
		// Keys were configured: a random key nobody asked for must not
		// open the check API. Admin keys may check.
		log.Warn("no client API key configured (--api-keys-file or RATEDB_API_KEYS): only admin keys may call the check API")
	default:
		dev := keys.Generate()
		k = k.AddClient(dev)
		fmt.Fprintf(stderr, "ratedb: no API key configured (--api-keys-file, --admin-keys-file, RATEDB_API_KEYS, RATEDB_ADMIN_KEYS); "+
			"generated a client key for development only, valid until this process exits:\n\n    X-API-Key: %s\n\n", dev)
	}

	h := httpapi.New(httpapi.Options{
		Core: cr, Rules: rm, Keys: k, Metrics: m.Handler(), DenyStatus: c.DenyStatus,
		LogKeys: c.LogKeys, Logger: log, Ready: st.ready, EnvoyRules: envoy.Rules, Clock: st.clock,
	})
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String(), "state", st.name)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopReload := make(chan struct{})
	// reloadDone is closed when the reload loop has ended: Run waits for
	// it, so that a reload in flight does not outlive Run. It waits once
	// it has closed the store: closing the Redis client ends a reload that
	// Redis does not answer (a hung server, a CLIENT PAUSE), which would
	// otherwise hold the stop for as long as it waits (ten times
	// --redis-timeout, at least 1 s, past --shutdown-timeout), and any
	// change of the rules that the reload waits for. Such a reload, ended by the stop,
	// logs nothing: the rules stay as they were.
	reloadDone := make(chan struct{})
	if st.reloadRules == 0 {
		close(reloadDone)
	} else {
		// Other instances may change the shared rules.
		go func() {
			defer close(reloadDone)
			t := time.NewTicker(st.reloadRules)
			defer t.Stop()
			for {
				select {
				case <-stopReload:
					return
				case <-t.C:
					if testBeforeReload != nil {
						testBeforeReload()
					}
					had := len(rm.Current().Rules())
					err := rm.Reload()
					select {
					case <-stopReload:
						return // it may have met the closed store
					default:
					}
					if err != nil {
						log.Warn("reloading the rules: what could not be read keeps its current version", "err", err)
					}
					if had > 0 && len(rm.Current().Rules()) == 0 {
						// Every rule deleted, or Redis lost its data (a
						// restart without persistence, a flush).
						log.Warn("reloading the rules: none are stored any more; serving the default rule only", "had", had)
					}
				}
			}
		}()
	}

	select {
	case err := <-served:
		close(stopReload)
		envoy.stop(context.Background())
		cerr := closeDB()
		<-reloadDone
		return errors.Join(fmt.Errorf("serving: %w", err), cerr)
	case <-stop:
	}
	close(stopReload)
	log.Info("shutting down: finishing requests in flight")
	ctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := srv.Shutdown(ctx); errors.Is(err, context.DeadlineExceeded) {
		// Logged when it happens, as the gRPC side's forced stop is: the
		// error returned is printed (by main, as plain text) only after
		// the final snapshot.
		log.Warn("shutdown: HTTP requests still in flight after --shutdown-timeout; cutting them off")
		errs = append(errs, fmt.Errorf("shutdown: requests still in flight after --shutdown-timeout %v were cut off: %w", c.ShutdownTimeout, err))
	} else if err != nil {
		errs = append(errs, fmt.Errorf("shutdown: %w", err))
	}
	if envoy.stop(ctx) {
		errs = append(errs, fmt.Errorf("shutdown: gRPC calls or connections still open after --shutdown-timeout %v were cut off", c.ShutdownTimeout))
	}
	if err := closeDB(); err != nil {
		errs = append(errs, err)
	}
	<-reloadDone
	if len(errs) == 0 {
		log.Info("stopped: " + st.stopped)
	}
	return errors.Join(errs...)
}

// keySource is the keys source of the flag file (the file it names) or,
// without it, of the environment variable env holding value, named for
// errors by the one that is used.
func keySource(file, value, flag, env string) keys.Source {
	if file != "" {
		return keys.Source{File: file, Name: flag}
	}
	return keys.Source{Env: value, Name: env}
}

// testBeforeReload, when set by a test, runs before each reload of the
// shared rules.
var testBeforeReload func()
