package grpcapi_test

import (
	"context"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Request headers (gRPC metadata) are bounded as the HTTP API bounds its
// headers (16 KiB). grpc-go's own default is 16 MiB, which MaxRecvMsgSize
// does not cover: a grpc.health.v1 Watch stream, which lasts as long as its
// client wants, keeps its headers for its whole life, so one unauthenticated
// connection could make the server hold 16 MiB per stream it opens.
func TestGRPCRequestHeadersAreBounded(t *testing.T) {
	f := start(t, nil)
	req := &rlsv3.RateLimitRequest{Domain: "basic", Descriptors: nil}
	req.Descriptors = append(req.Descriptors, desc("key1", "foo"))

	// What Envoy sends (tracing headers, a request id, ...) is served.
	ok := metadata.AppendToOutgoingContext(context.Background(), "x-pad", strings.Repeat("x", 8<<10))
	_, err := f.client.ShouldRateLimit(ok, req)
	require.NoError(t, err)

	big := metadata.AppendToOutgoingContext(context.Background(), "x-pad", strings.Repeat("x", 64<<10))
	_, err = f.client.ShouldRateLimit(big, req)
	require.Error(t, err, "a request with 64 KiB of headers must be refused")
	assert.NotEqual(t, codes.OK, status.Code(err))

	ctx, cancel := context.WithCancel(big)
	defer cancel()
	w, err := healthpb.NewHealthClient(f.conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	require.Error(t, err, "a Watch stream with 64 KiB of headers must be refused")
}
