package grpcapi

import (
	"context"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/metrics"
)

// ratedb_checks_total counts each check of an all-or-nothing request with
// its own verdict (core.Observer.Checked), the one its descriptor status
// answers: a descriptor within its limit, answered OK in a request another
// descriptor denied, is not a denial of its rule. Counting it as one blamed
// a rule that never reached its limit.
func TestChecksTotalCountsEachCheckWithItsOwnVerdict(t *testing.T) {
	const config = `
domain: m
descriptors:
  - key: tight
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: loose
    rate_limit: {unit: hour, requests_per_unit: 1000}
`
	m := metrics.New()
	s := testServer(t, config, Options{}, core.Options{Observer: m}, nil)
	check := func(keys ...string) *rlsv3.RateLimitResponse {
		req := &rlsv3.RateLimitRequest{Domain: "m"}
		for _, k := range keys {
			req.Descriptors = append(req.Descriptors, gapDesc(k, "v"))
		}
		resp, err := s.Check(context.Background(), req)
		require.NoError(t, err)
		return resp
	}
	require.Equal(t, rlsv3.RateLimitResponse_OK, check("tight").GetOverallCode())
	resp := check("tight", "loose")
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetStatuses()[0].GetCode())
	require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetStatuses()[1].GetCode(), "loose is within its limit")

	assert.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP ratedb_checks_total Checks decided, by API (http or envoy), rule and decision (allow or deny), one per check.
# TYPE ratedb_checks_total counter
ratedb_checks_total{api="envoy",decision="allow",rule="m.loose"} 1
ratedb_checks_total{api="envoy",decision="allow",rule="m.tight"} 1
ratedb_checks_total{api="envoy",decision="deny",rule="m.loose"} 0
ratedb_checks_total{api="envoy",decision="deny",rule="m.tight"} 1
`), "ratedb_checks_total"))
}

// README: an Envoy request decided descriptor by descriptor is one check
// request per descriptor for ratedb_check_duration_seconds and, failing
// open, for ratedb_store_errors_total; a request decided together is one.
func TestCheckRequestsOfIndependentRequests(t *testing.T) {
	for _, independent := range []bool{false, true} {
		m := metrics.New()
		s := testServer(t, gapConfig, Options{Independent: independent}, core.Options{FailOpen: true, Observer: m},
			func(st core.DBStore) core.Store { return downStore{st} })
		resp, err := s.Check(context.Background(), &rlsv3.RateLimitRequest{Domain: "gap",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{gapDesc("k", "down1"), gapDesc("k", "down2"), gapDesc("k", "down3")}})
		require.NoError(t, err)
		require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode(), "failed open")
		want := 1
		if independent {
			want = 3
		}
		n, err := testutil.GatherAndCount(m.Registry(), "ratedb_check_duration_seconds")
		require.NoError(t, err)
		require.Equal(t, 1, n)
		mfs, err := m.Registry().Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			switch mf.GetName() {
			case "ratedb_check_duration_seconds":
				assert.EqualValues(t, want, mf.GetMetric()[0].GetHistogram().GetSampleCount(), "independent %v", independent)
			case "ratedb_store_errors_total":
				assert.EqualValues(t, want, mf.GetMetric()[0].GetCounter().GetValue(), "independent %v", independent)
			}
		}
	}
}
