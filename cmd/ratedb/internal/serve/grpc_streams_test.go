package serve

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
)

// --grpc-max-concurrent-streams reaches the gRPC server, which advertises
// it; unset (0 in Config) it is grpcapi.DefaultMaxConcurrentStreams.
func TestGRPCMaxConcurrentStreamsIsAdvertised(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  uint
		want uint32
	}{
		{"default", 0, grpcapi.DefaultMaxConcurrentStreams},
		{"given", 7, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{
				HTTP: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "state.db"),
				APIKeysEnv: "k", DefaultLimit: 10, DefaultWindow: time.Minute, DefaultAlgorithm: "fixed",
				DenyStatus: 200, LogFormat: "text", LogLevel: "info",
				SnapshotPeriod: time.Second, ShutdownTimeout: 5 * time.Second,
				Envoy: EnvoyConfig{GRPC: "127.0.0.1:0", MaxStreams: tc.set},
			}
			addr, out, stop, done := runGRPC(t, c)
			n, ok := proctest.AdvertisedMaxStreams(t, addr)
			// The start-up line says what the server advertises.
			assert.Contains(t, out.String(), fmt.Sprintf("max_concurrent_streams=%d", tc.want))
			close(stop)
			require.NoError(t, <-done)
			require.True(t, ok, "SETTINGS_MAX_CONCURRENT_STREAMS advertised")
			assert.Equal(t, tc.want, n)
		})
	}
}
