package serve

import (
	"net"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
)

// runGRPC starts Run with c and returns its gRPC address, its log, the
// channel that stops it and the channel of its result.
func runGRPC(t *testing.T, c Config) (addr string, out *proctest.SyncBuffer, stop chan struct{}, done chan error) {
	t.Helper()
	out = &proctest.SyncBuffer{}
	stop = make(chan struct{})
	done = make(chan error, 1)
	go func() { done <- Run(c, out, stop) }()
	re := regexp.MustCompile(`listening \(gRPC[^\n]*addr=(\S+)`)
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, out.String())
	return addr, out, stop, done
}

// When the graceful stop of the gRPC server does not finish within
// --shutdown-timeout, the server is stopped by force: that is logged (as
// the HTTP side's cut-off is reported) and the stop returns at once. A
// connection that sent nothing yet is the sharpest case: grpc-go's Stop
// waits for connections still in their handshake (up to
// grpcapi.HandshakeTimeout, whose deadline starts when the server accepts
// the connection), so without closing them the "forced" stop, and the
// final snapshot after it, waited for the client: Run must return before
// that deadline.
func TestForcedGRPCStopIsLoggedAndImmediate(t *testing.T) {
	c := Config{
		HTTP: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "state.db"),
		APIKeysEnv: "k", DefaultLimit: 10, DefaultWindow: time.Minute, DefaultAlgorithm: "fixed",
		DenyStatus: 200, LogFormat: "text", LogLevel: "info",
		SnapshotPeriod: time.Second, ShutdownTimeout: 200 * time.Millisecond,
		Envoy: EnvoyConfig{GRPC: "127.0.0.1:0"},
	}
	addr, out, stop, done := runGRPC(t, c)
	// The server accepts the connection after this instant, so its
	// handshake deadline is at least HandshakeTimeout after it.
	dialed := time.Now()
	raw, err := net.Dial("tcp", addr) // connects and sends nothing
	require.NoError(t, err)
	defer raw.Close()
	// The server writes its SETTINGS frame before it reads the client's
	// preface: once it arrives, the connection is in its handshake.
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = raw.Read(make([]byte, 1))
	require.NoError(t, err)

	close(stop)
	select {
	case err = <-done:
	case <-time.After(grpcapi.HandshakeTimeout + 10*time.Second):
		t.Fatalf("Run still stopping %v after a 200 ms --shutdown-timeout\n%s", grpcapi.HandshakeTimeout+10*time.Second, out.String())
	}
	took := time.Since(dialed)
	assert.Less(t, took, grpcapi.HandshakeTimeout,
		"Run returned %v after the silent connection was made: the forced gRPC stop waited for its handshake deadline", took)
	// The only error: the state closed (final snapshot) without one.
	require.EqualError(t, err, "shutdown: gRPC calls or connections still open after --shutdown-timeout 200ms were cut off")
	assert.Regexp(t, `level=WARN msg="shutdown: gRPC calls or connections still open after --shutdown-timeout; cutting them off"`, out.String())
}

// A connection that never finishes its handshake does not hold the
// graceful stop until --shutdown-timeout (30 s by default, Kubernetes' own
// grace period): grpc-go waits for such connections, for up to 2 minutes
// by default; the handshake is bounded by grpcapi.HandshakeTimeout.
func TestSilentGRPCConnectionDoesNotHoldShutdown(t *testing.T) {
	c := Config{
		HTTP: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "state.db"),
		APIKeysEnv: "k", DefaultLimit: 10, DefaultWindow: time.Minute, DefaultAlgorithm: "fixed",
		DenyStatus: 200, LogFormat: "text", LogLevel: "info",
		SnapshotPeriod: time.Second, ShutdownTimeout: 60 * time.Second,
		Envoy: EnvoyConfig{GRPC: "127.0.0.1:0"},
	}
	addr, out, stop, done := runGRPC(t, c)
	raw, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = raw.Read(make([]byte, 1)) // the server's SETTINGS: in the handshake
	require.NoError(t, err)

	close(stop)
	select {
	case err = <-done:
	case <-time.After(grpcapi.HandshakeTimeout + 10*time.Second):
		t.Fatalf("Run still stopping %v after the stop: a silent connection holds the graceful stop\n%s", grpcapi.HandshakeTimeout+10*time.Second, out.String())
	}
	require.NoError(t, err, "stopped gracefully, nothing cut off")
	assert.Contains(t, out.String(), "final snapshot written")
}

// A signal that arrives during the start, before the gRPC server's
// goroutine has called Serve, stops the service gracefully without an
// ERROR line: Serve, called after the stop, returns grpc.ErrServerStopped,
// which is no failure (nothing was served). The hooks make that order
// certain: Serve waits until the graceful stop has returned.
func TestGRPCStoppedBeforeServingLogsNoError(t *testing.T) {
	stopped := make(chan struct{})
	testBeforeGRPCServe = func() { <-stopped }
	testAfterGRPCGracefulStop = func() { close(stopped) }
	defer func() { testBeforeGRPCServe, testAfterGRPCGracefulStop = nil, nil }()
	c := Config{
		HTTP: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "state.db"),
		APIKeysEnv: "k", DefaultLimit: 10, DefaultWindow: time.Minute, DefaultAlgorithm: "fixed",
		DenyStatus: 200, LogFormat: "text", LogLevel: "info",
		SnapshotPeriod: time.Second, ShutdownTimeout: 30 * time.Second,
		Envoy: EnvoyConfig{GRPC: "127.0.0.1:0"},
	}
	out := &proctest.SyncBuffer{}
	stop := make(chan struct{})
	close(stop) // the signal came before Run reached its wait
	require.NoError(t, Run(c, out, stop), out.String())
	assert.NotContains(t, out.String(), "level=ERROR")
	assert.Contains(t, out.String(), "final snapshot written")
}
