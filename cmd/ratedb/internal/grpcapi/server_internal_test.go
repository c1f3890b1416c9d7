package grpcapi

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

const gapConfig = `
domain: gap
descriptors:
  - key: quota
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000}
`

func gapServer(t *testing.T) *Server {
	t.Helper()
	return testServer(t, gapConfig, Options{}, core.Options{}, nil)
}

// testServer serves config (one YAML file) from a fresh embedded DB whose
// clock stands at 2026-01-01 00:00:30 UTC, through wrap's store if wrap is
// not nil.
func testServer(t *testing.T, config string, opts Options, copts core.Options, wrap func(core.DBStore) core.Store) *Server {
	t.Helper()
	cfg, err := envoyconf.Parse([]envoyconf.File{{Name: "test.yaml", Data: []byte(config)}})
	require.NoError(t, err)
	clock := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC) }
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "test.db"), &ratedb.Options{Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var store core.Store = core.DBStore{DB: db}
	if wrap != nil {
		store = wrap(core.DBStore{DB: db})
	}
	opts.Clock, copts.Clock = clock, clock
	return New(core.New(store, copts), cfg, &opts)
}

func gapDesc(k, v string) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{Entries: entries(k, v)}
}

func TestToStatusCallerGaveUp(t *testing.T) {
	assert.Equal(t, codes.Canceled, status.Code(toStatus(context.Canceled)))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(toStatus(context.DeadlineExceeded)))
}

func TestUntilResetAtLeastOneSecond(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(end time.Time) ratedb.Result {
		return ratedb.Result{Allowed: true, ResetAt: end, Scale: time.Minute}
	}
	assert.EqualValues(t, 1, untilReset(at(now), now).GetSeconds())
	assert.EqualValues(t, 1, untilReset(at(now.Add(-time.Second)), now).GetSeconds())
	assert.EqualValues(t, 2, untilReset(at(now.Add(1001*time.Millisecond)), now).GetSeconds())
	assert.EqualValues(t, 60, untilReset(at(now.Add(time.Hour)), now).GetSeconds(), "at most the window")
}

// MaxDescriptors descriptors are allowed.
func TestMaxDescriptorsAllowed(t *testing.T) {
	s := gapServer(t)
	descs := make([]*ratelimitv3.RateLimitDescriptor, MaxDescriptors)
	for i := range descs {
		descs[i] = gapDesc("k", "v")
	}
	resp, err := s.Check(context.Background(), &rlsv3.RateLimitRequest{Domain: "gap", Descriptors: descs})
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
}
