package grpcapi

import (
	"context"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

// envoyproxy/ratelimit's QUOTA_MODE=true makes every non-unlimited
// descriptor a quota descriptor, including one that matches no limit
// (src/service/ratelimit.go: isQuotaMode := globalQuotaMode || ...): such a
// descriptor is a quota descriptor that passed, so a request is OVER_LIMIT
// only when every descriptor is over its limit.
func TestGlobalQuotaModeUnmatchedDescriptorPasses(t *testing.T) {
	ok := rlsv3.RateLimitResponse_OK
	for _, independent := range []bool{false, true} {
		s := globalServer(t, Options{QuotaMode: true, Independent: independent})
		require.Equal(t, ok, gcheck(t, s, gapDesc("a", "x"), gapDesc("nomatch", "z")).GetOverallCode())
		resp := gcheck(t, s, gapDesc("a", "x"), gapDesc("nomatch", "z"))
		assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetStatuses()[0].GetCode())
		assert.Equal(t, ok, resp.GetOverallCode(),
			"QUOTA_MODE: the unmatched descriptor is a quota descriptor that passed (independent %v)", independent)
	}
}

// A descriptor with hits_addend 0 reports the limit_remaining left after the
// request, like any other: envoyproxy/ratelimit INCRBYs its key by 0 after
// the earlier descriptors of the request counted theirs
// (src/redis/fixed_cache_impl.go), so two equal descriptors, the second
// with hits_addend 0, both answer 999 after one hit of a 1000 limit.
func TestPeekAfterHitInSameRequestRemaining(t *testing.T) {
	for _, independent := range []bool{false, true} {
		s := testServer(t, gapConfig, Options{Independent: independent}, core.Options{}, nil)
		peek := gapDesc("k", "v")
		peek.HitsAddend = wrapperspb.UInt64(0)
		resp, err := s.Check(context.Background(), &rlsv3.RateLimitRequest{Domain: "gap",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{gapDesc("k", "v"), peek}})
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
		assert.EqualValues(t, 999, resp.GetStatuses()[0].GetLimitRemaining(), "independent %v", independent)
		assert.EqualValues(t, 999, resp.GetStatuses()[1].GetLimitRemaining(),
			"the key holds 1 hit after this request (independent %v)", independent)
	}
}

// With QUOTA_MODE=true and a descriptor that matches nothing (a quota
// descriptor that passed), a request is answered OK even when every
// limited descriptor is over its limit, and is carried out as an allowed
// one: a refund it holds (is_negative_hits) is applied.
func TestGlobalQuotaModeUnmatchedDescriptorAppliesRefunds(t *testing.T) {
	s := globalServer(t, Options{QuotaMode: true})
	gcheck(t, s, gapDesc("a", "x"), gapDesc("b", "y")) // a's one hit an hour is used; b holds 1 of 2
	refund := gapDesc("b", "y")
	refund.IsNegativeHits = true
	resp := gcheck(t, s, gapDesc("a", "x"), refund, gapDesc("nomatch", "z"))
	require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetStatuses()[0].GetCode())
	resp = gcheck(t, s, gapDesc("b", "y"))
	assert.EqualValues(t, 1, resp.GetStatuses()[0].GetLimitRemaining(), "the refund was applied: b holds this hit only")
}
