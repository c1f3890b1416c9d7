package grpcapi_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// envoyproxy/ratelimit registers its gRPC health status under the service
// name "ratelimit" (src/server/server_impl.go:293), the name an Envoy
// cluster's grpc_health_check.service_name or a Kubernetes grpc probe
// configured for it asks for. A drop-in replacement must answer it.
func TestHealthAnswersUpstreamServiceName(t *testing.T) {
	f := start(t, nil)
	resp, err := healthpb.NewHealthClient(f.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "ratelimit"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
}
