package grpcapi

import (
	"context"
	"strings"
	"testing"

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
# HELP ratedb_checks_total Checks decided, by rule and decision (allow or deny), one per check.
# TYPE ratedb_checks_total counter
ratedb_checks_total{decision="allow",rule="m.loose"} 1
ratedb_checks_total{decision="allow",rule="m.tight"} 1
ratedb_checks_total{decision="deny",rule="m.loose"} 0
ratedb_checks_total{decision="deny",rule="m.tight"} 1
`), "ratedb_checks_total"))
}
