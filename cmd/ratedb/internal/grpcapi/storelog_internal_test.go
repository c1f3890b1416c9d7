package grpcapi

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

// While the store is down every call fails: the log gets one line a
// second, not one a call, which callers could use to fill it.
func TestStoreFailuresLogOnceASecond(t *testing.T) {
	var buf bytes.Buffer
	s := testServer(t, gapConfig, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))}, core.Options{},
		func(st core.DBStore) core.Store { return downStore{st} })
	for range 50 {
		_, err := s.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "gap", Descriptors: []*ratelimitv3.RateLimitDescriptor{gapDesc("k", "down")}})
		require.Equal(t, codes.Unavailable, status.Code(err))
	}
	assert.Equal(t, 1, strings.Count(buf.String(), "store failed"), "one line within a second (the test's clock stands still)")
}
