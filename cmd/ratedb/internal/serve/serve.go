package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/metrics"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/ratedb/ratedb/ratedbprom"
)

// ErrRedisUnavailable is returned for --redis until the Redis store is part
// of this build.
var ErrRedisUnavailable = errors.New("--redis is not available yet: the Redis store (issue 10) has not landed in this build; use --db")

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
	log := newLogger(&c, stderr)
	if c.Redis != "" {
		return ErrRedisUnavailable
	}
	limit := c.DefaultLimit
	def, err := rules.Build(rules.DefaultName, rules.Spec{
		ClientID: "*", Route: "*", Algorithm: c.DefaultAlgorithm, Limit: &limit, Window: c.DefaultWindow.String(),
	}, true)
	if err != nil {
		return fmt.Errorf("default rule (--default-limit, --default-window): %w", err)
	}
	k, err := keys.Load(keys.Source{File: c.APIKeysFile, Env: c.APIKeysEnv}, keys.Source{File: c.AdminKeysFile, Env: c.AdminKeysEnv})
	if err != nil {
		return err
	}
	var fileRules []*rules.Rule
	if c.Rules != "" {
		b, err := os.ReadFile(c.Rules)
		if err != nil {
			return fmt.Errorf("--rules: %w", err)
		}
		if fileRules, err = rules.ParseFile(b); err != nil {
			return fmt.Errorf("--rules %s: %w", c.Rules, err)
		}
	}

	db, err := ratedb.Open(c.DB, &ratedb.Options{Logger: log, SnapshotPeriod: c.SnapshotPeriod})
	if errors.Is(err, ratedb.ErrLocked) {
		return fmt.Errorf("%s is in use by another ratedb process (its lock is held): %w", c.DB, err)
	}
	if err != nil {
		return fmt.Errorf("opening %s: %w", c.DB, err)
	}
	closeDB := func() error {
		if err := db.Close(); err != nil && !errors.Is(err, ratedb.ErrClosed) {
			return fmt.Errorf("closing %s: %w", c.DB, err)
		}
		return nil
	}
	rm, err := rules.NewManager(rules.FileStorage{Path: rules.RulesPath(c.DB)}, def)
	if err != nil {
		return errors.Join(err, closeDB())
	}
	if len(fileRules) > 0 {
		if _, err := rm.Import(fileRules); err != nil {
			return errors.Join(err, closeDB())
		}
		log.Info("imported rules", "file", c.Rules, "rules", len(fileRules))
	}
	if !k.HasClientKeys() {
		dev := keys.Generate()
		k = k.AddClient(dev)
		fmt.Fprintf(stderr, "ratedb: no client API key configured (--api-keys-file or RATEDB_API_KEYS); "+
			"generated one for development only, valid until this process exits:\n\n    X-API-Key: %s\n\n", dev)
	}

	m := metrics.New(ratedbprom.NewCollector(db))
	cr := core.New(core.DBStore{DB: db}, core.Options{Observer: m, FailOpen: c.FailOpen})
	envoy, err := startEnvoy(c.Envoy, cr, log)
	if err != nil {
		return errors.Join(err, closeDB())
	}
	h := httpapi.New(httpapi.Options{
		Core: cr, Rules: rm, Keys: k, Metrics: m.Handler(), DenyStatus: c.DenyStatus,
		LogKeys: c.LogKeys, Logger: log, Ready: readyDB(db), EnvoyRules: envoy.Rules,
	})
	ln, err := net.Listen("tcp", c.HTTP)
	if err != nil {
		envoy.stop(context.Background())
		return errors.Join(fmt.Errorf("--http: %w", err), closeDB())
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String(), "db", c.DB)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		envoy.stop(context.Background())
		return errors.Join(fmt.Errorf("serving: %w", err), closeDB())
	case <-stop:
	}
	log.Info("shutting down: finishing requests in flight")
	ctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	var errs []error
	if err := srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("shutdown: %w", err))
	}
	envoy.stop(ctx)
	if err := closeDB(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		log.Info("stopped: final snapshot written")
	}
	return errors.Join(errs...)
}

// readyDB reports whether the embedded file is usable: a snapshot (which
// waits for the file's audit after Open) succeeds now.
func readyDB(db *ratedb.DB) func(context.Context) error {
	return func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() { done <- db.Snapshot() }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
