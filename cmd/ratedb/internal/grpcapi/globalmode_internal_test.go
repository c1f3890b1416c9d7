package grpcapi

import (
	"context"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

const globalConfig = `
domain: g
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 2}
`

func globalServer(t *testing.T, opts Options) *Server {
	t.Helper()
	return testServer(t, globalConfig, opts, core.Options{}, nil)
}

func gcheck(t *testing.T, s *Server, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := s.Check(context.Background(), &rlsv3.RateLimitRequest{Domain: "g", Descriptors: descs})
	require.NoError(t, err)
	return resp
}

// ShadowMode (SHADOW_MODE=true) answers OK overall; the statuses and the
// counting are those without it.
func TestGlobalShadowMode(t *testing.T) {
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	s := globalServer(t, Options{ShadowMode: true})
	assert.Equal(t, ok, gcheck(t, s, gapDesc("a", "x")).GetOverallCode())
	resp := gcheck(t, s, gapDesc("a", "x"), gapDesc("b", "x"))
	assert.Equal(t, ok, resp.GetOverallCode(), "shadow mode")
	assert.Equal(t, over, resp.GetStatuses()[0].GetCode(), "the status says what the limit decided")
	resp = gcheck(t, s, gapDesc("b", "x"))
	assert.EqualValues(t, 1, resp.GetStatuses()[0].GetLimitRemaining(), "the request over a's limit counted nothing (all-or-nothing)")

	s = globalServer(t, Options{})
	gcheck(t, s, gapDesc("a", "x"))
	assert.Equal(t, over, gcheck(t, s, gapDesc("a", "x")).GetOverallCode(), "without it")
}

// QuotaMode (QUOTA_MODE=true) makes every limit a quota_mode one, limit
// overrides included.
func TestGlobalQuotaMode(t *testing.T) {
	ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	s := globalServer(t, Options{QuotaMode: true})
	assert.Equal(t, ok, gcheck(t, s, gapDesc("a", "x"), gapDesc("b", "x")).GetOverallCode())
	resp := gcheck(t, s, gapDesc("a", "x"), gapDesc("b", "x"))
	assert.Equal(t, ok, resp.GetOverallCode(), "b still has room")
	assert.Equal(t, over, resp.GetStatuses()[0].GetCode())
	resp = gcheck(t, s, gapDesc("a", "x"), gapDesc("b", "x"))
	assert.Equal(t, over, resp.GetOverallCode(), "both quotas used up")

	override := &ratelimitv3.RateLimitDescriptor{Entries: entries("a", "y"),
		Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: 3}} // 1 per hour
	assert.Equal(t, ok, gcheck(t, s, override, gapDesc("b", "y")).GetOverallCode())
	resp = gcheck(t, s, override, gapDesc("b", "y"))
	assert.Equal(t, ok, resp.GetOverallCode(), "the override is a quota too: b has room")
	assert.Equal(t, over, resp.GetStatuses()[0].GetCode())
}
