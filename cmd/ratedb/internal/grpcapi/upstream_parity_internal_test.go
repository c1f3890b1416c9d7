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
	"github.com/ratedb/ratedb/cmd/ratedb/internal/metrics"
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

// QUOTA_MODE=true makes a descriptor whose limit another descriptor of the
// request replaces a quota descriptor that passed, as it does one that
// matches no limit (envoyproxy/ratelimit nils a replaced limit, then counts
// every descriptor but an unlimited one as a quota descriptor): the request
// is not over the limit, and, as the README's metrics section says, it is
// decided descriptor by descriptor, one check request each.
func TestGlobalQuotaModeReplacedDescriptorPasses(t *testing.T) {
	const config = `
domain: g
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: named
    rate_limit: {unit: hour, requests_per_unit: 5, name: N}
  - key: replacing
    rate_limit: {unit: hour, requests_per_unit: 5, replaces: [{name: N}]}
`
	m := metrics.New()
	s := testServer(t, config, Options{QuotaMode: true}, core.Options{Observer: m}, nil)
	check := func(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := s.Check(context.Background(), &rlsv3.RateLimitRequest{Domain: "g", Descriptors: descs})
		require.NoError(t, err)
		return resp
	}
	over := func(k, v string) *ratelimitv3.RateLimitDescriptor {
		d := gapDesc(k, v)
		d.HitsAddend = wrapperspb.UInt64(6) // over every limit here
		return d
	}
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, check(over("a", "x"), over("replacing", "x")).GetOverallCode(),
		"every quota descriptor is over its limit")
	observed := func() uint64 {
		t.Helper()
		mfs, err := m.Registry().Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "ratedb_check_duration_seconds" {
				return mf.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		return 0
	}
	before := observed()
	resp := check(over("a", "x"), gapDesc("named", "x"), over("replacing", "x"))
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode(), "the replaced descriptor is a quota descriptor that passed")
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetStatuses()[0].GetCode())
	assert.Nil(t, resp.GetStatuses()[1].GetCurrentLimit(), "replaced")
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetStatuses()[2].GetCode())
	assert.EqualValues(t, 2, observed()-before, "decided descriptor by descriptor: one check request per limited descriptor")
}

// quota_mode is a soft limit, as in envoyproxy/ratelimit since March 2026
// (05c08d0): a quota descriptor over its limit answers OVER_LIMIT in its own
// status, and the request is over the limit only when every quota
// descriptor is (or an enforced one is).
func TestQuotaModeLikeUpstream(t *testing.T) {
	for _, independent := range []bool{false, true} {
		s := gapServer(t)
		s.opts.Independent = independent
		check := func(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
			resp, err := s.Check(context.Background(), &rlsv3.RateLimitRequest{Domain: "gap", Descriptors: descs})
			require.NoError(t, err)
			return resp
		}
		codes := func(resp *rlsv3.RateLimitResponse) []rlsv3.RateLimitResponse_Code {
			var out []rlsv3.RateLimitResponse_Code
			for _, st := range resp.GetStatuses() {
				out = append(out, st.GetCode())
			}
			return out
		}
		ok, over := rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT

		resp := check(gapDesc("quota", "x"), gapDesc("k", "v"))
		assert.Equal(t, ok, resp.GetOverallCode(), "independent %v", independent)
		resp = check(gapDesc("quota", "x"), gapDesc("quota", "y"), gapDesc("k", "v"))
		assert.Equal(t, ok, resp.GetOverallCode(), "y's quota fits (independent %v)", independent)
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok, ok}, codes(resp), "x over its quota (independent %v)", independent)
		resp = check(gapDesc("quota", "x"), gapDesc("quota", "y"), gapDesc("k", "v"))
		assert.Equal(t, over, resp.GetOverallCode(), "every quota is over (independent %v)", independent)
		assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, over, ok}, codes(resp), "independent %v", independent)
		resp = check(gapDesc("quota", "x"))
		assert.Equal(t, over, resp.GetOverallCode(), "a lone quota over its limit (independent %v)", independent)
		resp = check(gapDesc("k", "v"))
		assert.Equal(t, ok, resp.GetOverallCode(), "independent %v", independent)
		if independent {
			assert.EqualValues(t, 1000-4, resp.GetStatuses()[0].GetLimitRemaining(), "k counted on its own in the denied request")
		} else {
			assert.EqualValues(t, 1000-3, resp.GetStatuses()[0].GetLimitRemaining(), "the denied request counted nothing")
		}
	}
}
