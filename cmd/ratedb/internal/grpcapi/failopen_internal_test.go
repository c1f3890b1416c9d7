package grpcapi

import (
	"context"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

// downStore fails every Hit of a key holding "down" with ErrUnavailable.
type downStore struct{ core.DBStore }

type downWindow struct{ core.WindowLimiter }

func (s downStore) Window(alg ratedb.Algorithm, scale time.Duration) (core.WindowLimiter, error) {
	w, err := s.DBStore.Window(alg, scale)
	return downWindow{w}, err
}

func (w downWindow) Hit(ctx context.Context, key string, limit, increment int64) (ratedb.Result, error) {
	if strings.Contains(key, "down") {
		return ratedb.Result{}, ratedb.ErrUnavailable
	}
	return w.WindowLimiter.Hit(ctx, key, limit, increment)
}

// With --envoy-independent and --fail-open, a descriptor whose store call
// fails open answers OK on its own: the others keep their answers, an
// OVER_LIMIT included.
func TestIndependentFailOpenKeepsOtherAnswers(t *testing.T) {
	s := testServer(t, gapConfig, Options{Independent: true}, core.Options{FailOpen: true},
		func(st core.DBStore) core.Store { return downStore{st} })
	check := func(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		resp, err := s.Check(context.Background(), &rlsv3.RateLimitRequest{Domain: "gap", Descriptors: descs})
		require.NoError(t, err)
		return resp
	}
	require.Equal(t, rlsv3.RateLimitResponse_OK, check(gapDesc("quota", "x")).GetOverallCode())
	resp := check(gapDesc("quota", "x"), gapDesc("k", "down"))
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetStatuses()[0].GetCode(), "decided on its own, before the failure")
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetStatuses()[1].GetCode(), "failed open")
	assert.Nil(t, resp.GetStatuses()[1].GetCurrentLimit(), "a failed-open status carries no limit")
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode(), "the lone quota is over its limit")
}
