package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/metrics"
	"google.golang.org/grpc"
)

// EnvoyConfig is what the Envoy rate limit service is told by its flags
// (see main.go): --grpc, --envoy-config, --envoy-independent,
// --envoy-config-poll, --envoy-config-ignore-dotfiles,
// --envoy-config-merge-domains, --envoy-shadow-mode, --envoy-quota-mode,
// --grpc-tls-cert, --grpc-tls-key, --grpc-client-ca,
// --grpc-max-concurrent-streams.
type EnvoyConfig struct {
	GRPC           string
	Config         string
	Independent    bool
	Poll           time.Duration
	IgnoreDotFiles bool
	MergeDomains   bool
	ShadowMode     bool
	QuotaMode      bool
	TLSCert        string
	TLSKey         string
	TLSClientCA    string
	// MaxStreams bounds the calls open at once on one gRPC connection; 0
	// means grpcapi.DefaultMaxConcurrentStreams (the flag refuses 0).
	MaxStreams uint
	// Reload delivers SIGHUP: each value reloads Config.
	Reload <-chan struct{}
}

// minEnvoyPoll is the shortest --envoy-config-poll but 0 (shorter would
// make the server spin reading the files).
const minEnvoyPoll = 10 * time.Millisecond

// validate appends the problems of e to p.
func (e *EnvoyConfig) validate(p []string, given map[string]bool) []string {
	if e.GRPC == "" {
		if e.Config != "" {
			p = append(p, "--envoy-config needs --grpc")
		}
		if e.ShadowMode || e.QuotaMode {
			p = append(p, "--envoy-shadow-mode and --envoy-quota-mode need --grpc")
		}
		if e.Independent {
			p = append(p, "--envoy-independent needs --grpc")
		}
		if e.TLSCert != "" || e.TLSKey != "" || e.TLSClientCA != "" {
			p = append(p, "--grpc-tls-* need --grpc")
		}
		if given["grpc-max-concurrent-streams"] {
			p = append(p, "--grpc-max-concurrent-streams needs --grpc")
		}
	} else {
		if (e.TLSCert == "") != (e.TLSKey == "") {
			p = append(p, "--grpc-tls-cert and --grpc-tls-key must be given together")
		}
		if e.TLSClientCA != "" && e.TLSCert == "" && e.TLSKey == "" {
			p = append(p, "--grpc-client-ca needs --grpc-tls-cert and --grpc-tls-key (client certificates are asked for in the TLS handshake)")
		}
	}
	if (given["grpc-max-concurrent-streams"] && e.MaxStreams == 0) || e.MaxStreams > math.MaxUint32 {
		p = append(p, fmt.Sprintf("--grpc-max-concurrent-streams must be from 1 to %d", uint64(math.MaxUint32)))
	}
	if e.Config == "" && (e.IgnoreDotFiles || e.MergeDomains || given["envoy-config-poll"]) {
		p = append(p, "--envoy-config-ignore-dotfiles, --envoy-config-merge-domains and --envoy-config-poll need --envoy-config")
	}
	if e.Poll < 0 || (e.Poll > 0 && e.Poll < minEnvoyPoll) {
		p = append(p, fmt.Sprintf("--envoy-config-poll must be 0 (only on SIGHUP) or at least %v", minEnvoyPoll))
	}
	return p
}

// envoyService is the running gRPC side of `ratedb serve`.
type envoyService struct {
	srv    *grpcapi.Server
	stopFn func(ctx context.Context) bool
}

// Rules returns the Envoy rules for GET /v1/rules (nil when not serving).
func (e *envoyService) Rules() any {
	if e == nil {
		return nil
	}
	return e.srv.RuleViews()
}

// loadTLS reads the gRPC server's TLS files (nil: plaintext, or no --grpc),
// naming in an error the flag of the file that cannot be used. validate has
// checked that the certificate and the key come together.
func (e *EnvoyConfig) loadTLS() (*tls.Config, error) {
	if e.GRPC == "" {
		return nil, nil
	}
	// The pair alone first, so that an error names its flags rather than
	// the client CA's; reading it twice costs nothing at start.
	if _, err := grpcapi.TLSConfig(e.TLSCert, e.TLSKey, ""); err != nil {
		return nil, fmt.Errorf("--grpc-tls-cert, --grpc-tls-key: %w", err)
	}
	conf, err := grpcapi.TLSConfig(e.TLSCert, e.TLSKey, e.TLSClientCA)
	if err != nil {
		return nil, fmt.Errorf("--grpc-client-ca: %w", err)
	}
	return conf, nil
}

// envoyLoad is --envoy-config as read at start, by loadConfig.
type envoyLoad struct {
	// w read cfg: it compares each poll's files with the version its last
	// Load read, so a change made during or after this load is polled.
	w   *envoyconf.Watcher
	cfg *envoyconf.Config // nil without --envoy-config
	at  time.Time         // when cfg was loaded
}

// loadConfig reads --envoy-config, if given with --grpc, naming the flag in
// an error. Run calls it before the state is opened, as it reads the keys,
// rules and TLS files, so that a config that cannot be loaded ends the
// start before anything was created, imported or printed.
func (e *EnvoyConfig) loadConfig() (*envoyLoad, error) {
	if e.GRPC == "" {
		return nil, nil
	}
	l := &envoyLoad{w: envoyconf.NewWatcher(e.Config, e.loadOptions())}
	if e.Config != "" {
		var err error
		if l.cfg, err = l.w.Load(); err != nil {
			return nil, fmt.Errorf("--envoy-config: %w", err)
		}
		l.at = time.Now()
	}
	return l, nil
}

// loadOptions are the flags that say how --envoy-config is read.
func (e *EnvoyConfig) loadOptions() envoyconf.LoadOptions {
	return envoyconf.LoadOptions{IgnoreDotFiles: e.IgnoreDotFiles, MergeDomains: e.MergeDomains}
}

// startEnvoy starts the gRPC server when --grpc is set, with the TLS
// configuration tlsConf (nil: plaintext) from loadTLS and the config l
// from loadConfig; it returns nil otherwise. The config's loads, the one
// at start included, are recorded in m. clock is the store's (nil: the
// gRPC server's default).
func startEnvoy(e EnvoyConfig, tlsConf *tls.Config, l *envoyLoad, cr *core.Core, m *metrics.Metrics, clock func() time.Time, log *slog.Logger) (*envoyService, error) {
	if e.GRPC == "" {
		return nil, nil
	}
	lo := e.loadOptions()
	w, cfg := l.w, l.cfg
	var loads *metrics.EnvoyConfigLoads
	if e.Config != "" {
		loads = m.EnvoyConfig()
		loads.Loaded(l.at)
		log.Info("envoy config: loaded", "path", e.Config, "files", len(cfg.Files()), "rules", len(cfg.Rules()))
	} else {
		log.Warn("--grpc without --envoy-config: no domain is configured, so every descriptor answers OK with no limit")
	}
	srv := grpcapi.New(cr, cfg, &grpcapi.Options{Independent: e.Independent, Logger: log, Load: lo,
		ShadowMode: e.ShadowMode, QuotaMode: e.QuotaMode, Clock: clock})
	streams := uint32(e.MaxStreams)
	if streams == 0 {
		streams = grpcapi.DefaultMaxConcurrentStreams
	}
	g, health := grpcapi.NewGRPCServer(srv, tlsConf, streams)
	inner, err := net.Listen("tcp", e.GRPC)
	if err != nil {
		return nil, fmt.Errorf("--grpc: %w", err)
	}
	ln := newTrackingListener(inner)
	log.Info("listening (gRPC, Envoy rate limit service)", "addr", ln.Addr().String(), "tls", tlsConf != nil,
		"client_certs", tlsConf != nil && tlsConf.ClientCAs != nil, "all_or_nothing", !e.Independent,
		"shadow_mode", e.ShadowMode, "quota_mode", e.QuotaMode, "max_concurrent_streams", streams)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() {
		if testBeforeGRPCServe != nil {
			testBeforeGRPCServe()
		}
		// ErrServerStopped: the stop came before Serve (a signal during
		// the start), which then only closes ln; nothing was served.
		if err := g.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, grpc.ErrServerStopped) {
			log.Error("gRPC server stopped", "err", err)
		}
		done <- struct{}{}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		if e.Config == "" {
			<-ctx.Done()
			return
		}
		var poll <-chan time.Time
		if e.Poll > 0 {
			t := time.NewTicker(e.Poll)
			defer t.Stop()
			poll = t.C
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.Reload:
				log.Info("envoy config: SIGHUP")
				cfg, err := w.Load()
				loads.Reloaded(time.Now(), srv.Apply(e.Config, cfg, err)) // logged by Apply
			case <-poll:
				if cfg, changed, err := w.Poll(); changed {
					loads.Reloaded(time.Now(), srv.Apply(e.Config, cfg, err))
				}
			}
		}
	}()
	stop := func(sctx context.Context) bool {
		health.Shutdown()
		cancel()
		stopped := make(chan struct{})
		go func() {
			g.GracefulStop()
			if testAfterGRPCGracefulStop != nil {
				testAfterGRPCGracefulStop()
			}
			close(stopped)
		}()
		forced := false
		select {
		case <-stopped:
		case <-sctx.Done():
			forced = true
			log.Warn("shutdown: gRPC calls or connections still open after --shutdown-timeout; cutting them off")
			// grpc-go's Stop waits for the connections still in their
			// handshake (up to 2 minutes for one that sends nothing):
			// closing them first makes the forced stop immediate.
			ln.closeAll()
			g.Stop()
		}
		<-done
		<-done
		return forced
	}
	return &envoyService{srv: srv, stopFn: stop}, nil
}

// testBeforeGRPCServe, when set by a test, runs in the gRPC server's
// goroutine before it calls Serve; testAfterGRPCGracefulStop, when set,
// runs once the graceful stop of the gRPC server has returned.
var testBeforeGRPCServe, testAfterGRPCGracefulStop func()

// stop stops accepting gRPC calls and waits for those in flight until ctx
// is done, then cuts off those still open. It reports whether it had to
// cut any off. Safe on nil.
func (e *envoyService) stop(ctx context.Context) bool {
	if e == nil {
		return false
	}
	return e.stopFn(ctx)
}

// trackingListener is a net.Listener that keeps the connections it
// accepted, so that a forced stop can close them all: grpc.Server.Stop
// closes the connections it serves, but waits for those still in their
// handshake, which a client that connects and sends nothing holds open
// until grpcapi.HandshakeTimeout.
//
// It hands grpc-go the accepted connections themselves, never a wrapper:
// grpc-go sets TCP_USER_TIMEOUT (its keepalive timeout, 20 s) only on a
// *net.TCPConn, and without it a peer gone without a FIN, with data sent
// to it unacknowledged, holds its connection for the kernel's 15 minutes
// of retransmissions. So it is not told when a connection closes: it
// forgets the closed ones whenever its set has doubled since it last did,
// so that the set holds at most about twice the connections open (and at
// least minSweep) for constant work per Accept, amortised. Safe for
// concurrent use.
type trackingListener struct {
	net.Listener
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	sweepAt int // forget the closed connections when conns reaches it
	closed  bool
}

// minSweep is the fewest connections a trackingListener holds before it
// forgets the closed ones.
const minSweep = 64

func newTrackingListener(l net.Listener) *trackingListener {
	return &trackingListener{Listener: l, conns: map[net.Conn]struct{}{}, sweepAt: minSweep}
}

// Accept returns the next connection, already closed once closeAll has
// run.
func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	closed := l.closed
	if !closed {
		if len(l.conns) >= l.sweepAt {
			for o := range l.conns {
				if !isOpen(o) {
					delete(l.conns, o)
				}
			}
			l.sweepAt = max(2*len(l.conns), minSweep)
		}
		l.conns[c] = struct{}{}
	}
	l.mu.Unlock()
	if closed {
		_ = c.Close()
	}
	return c, nil
}

// closeAll closes every connection accepted and not yet closed, and those
// accepted after it.
func (l *trackingListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for c := range conns {
		_ = c.Close() // an error for one closed already
	}
}

// isOpen reports whether c has not been closed (by this process: one its
// peer closed is open until grpc-go closes it).
func isOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	// Fails with net.ErrClosed once c is closed.
	return raw.Control(func(uintptr) {}) == nil
}
