package grpcapi

import (
	"context"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A quota_mode descriptor sent with is_negative_hits is a refund: the core
// leaves refunds out of the set's quota group (core.Limit.Quota), so a
// request whose other quota descriptors are all over its limit is denied
// and counts nothing. The overall code must say so: answering OK lets the
// request through with its enforced descriptors uncounted.
func TestQuotaRefundOverallAgreesWithCore(t *testing.T) {
	s := gapServer(t)
	check := func(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		resp, err := s.Check(context.Background(), &rlsv3.RateLimitRequest{Domain: "gap", Descriptors: descs})
		require.NoError(t, err)
		return resp
	}
	require.Equal(t, rlsv3.RateLimitResponse_OK, check(gapDesc("quota", "x")).GetOverallCode()) // x's quota used up
	refund := gapDesc("quota", "y")
	refund.IsNegativeHits = true
	resp := check(gapDesc("quota", "x"), refund, gapDesc("k", "v"))
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode(), "the only quota hit is over its limit")
	remaining := check(gapDesc("k", "v")).GetStatuses()[0].GetLimitRemaining()
	assert.EqualValues(t, 1000-1, remaining, "the denied request counted nothing")
}
