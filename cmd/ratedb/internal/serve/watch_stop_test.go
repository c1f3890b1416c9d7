package serve

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A grpc.health.v1 Watch stream lasts as long as its client likes, and
// anyone who reaches the gRPC port may open one: it must not hold the
// graceful stop (and the final snapshot after it) until --shutdown-timeout,
// past which an orchestrator's own grace period (Kubernetes: 30 s, the
// default --shutdown-timeout) may kill the process first.
func TestHealthWatchDoesNotHoldShutdown(t *testing.T) {
	c := Config{
		HTTP: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "state.db"),
		APIKeysEnv: "k", DefaultLimit: 10, DefaultWindow: time.Minute, DefaultAlgorithm: "fixed",
		DenyStatus: 200, LogFormat: "text", LogLevel: "info",
		SnapshotPeriod: time.Second, ShutdownTimeout: 20 * time.Second,
		Envoy: EnvoyConfig{GRPC: "127.0.0.1:0"},
	}
	addr, out, stop, done := runGRPC(t, c)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	first, err := w.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, first.GetStatus())

	start := time.Now()
	close(stop)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatalf("Run still stopping after 15 s: an open health Watch holds the graceful stop")
	}
	require.Less(t, time.Since(start), 5*time.Second)
	// The watcher was told NOT_SERVING before its stream ended.
	st, err := w.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, st.GetStatus())
	_, err = w.Recv()
	require.ErrorIs(t, err, io.EOF, "the stream ended normally")
	require.Contains(t, out.String(), "final snapshot written")
}
