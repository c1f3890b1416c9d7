package grpcapi

// Tests added after mutation testing (TestGap...): each fails with one
// deliberate bug that the rest of the suite let through.

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

func TestGapToStatusCallerGaveUp(t *testing.T) {
	assert.Equal(t, codes.Canceled, status.Code(toStatus(context.Canceled)))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(toStatus(context.DeadlineExceeded)))
}

func TestGapUntilResetAtLeastOneSecond(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(end time.Time) ratedb.Result {
		return ratedb.Result{Allowed: true, ResetAt: end, Scale: time.Minute}
	}
	assert.EqualValues(t, 1, untilReset(at(now), now).GetSeconds())
	assert.EqualValues(t, 1, untilReset(at(now.Add(-time.Second)), now).GetSeconds())
	assert.EqualValues(t, 2, untilReset(at(now.Add(1001*time.Millisecond)), now).GetSeconds())
	assert.EqualValues(t, 60, untilReset(at(now.Add(time.Hour)), now).GetSeconds(), "at most the window")
}

// Only the entries a share_threshold matched are shared; the others keep
// their own values.
func TestGapCountedKeyShareOnlyMatchedEntries(t *testing.T) {
	share := []string{"", "files/*"}
	a := countedKey("d", entries("tenant", "a", "path", "files/x"), share)
	b := countedKey("d", entries("tenant", "b", "path", "files/y"), share)
	assert.NotEqual(t, a, b, "tenants a and b must not share a counter")
	assert.Equal(t, a, countedKey("d", entries("tenant", "a", "path", "files/z"), share))
}

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

// MaxDescriptors descriptors are allowed.
func TestGapMaxDescriptorsAllowed(t *testing.T) {
	s := gapServer(t)
	descs := make([]*ratelimitv3.RateLimitDescriptor, MaxDescriptors)
	for i := range descs {
		descs[i] = gapDesc("k", "v")
	}
	resp, err := s.Check(context.Background(), &rlsv3.RateLimitRequest{Domain: "gap", Descriptors: descs})
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
}
