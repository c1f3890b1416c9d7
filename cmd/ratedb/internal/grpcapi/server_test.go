package grpcapi_test

import (
	"context"
	"math"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
)

// now is the fixed instant of these tests: 30 s into a minute, so minute
// windows reset in 30 s and hour windows in 3570 s.
var now = time.Date(2026, 11, 23, 10, 0, 30, 0, time.UTC)

// configYAML ports the configs of envoyproxy/ratelimit's integration tests
// (basic, another, reload) and adds the features they do not cover.

// integrationDir holds the configs ported from envoyproxy/ratelimit's
// integration tests, plus features.yaml.
const integrationDir = "../envoyconf/testdata/integration"

type fixture struct {
	client rlsv3.RateLimitServiceClient
	conn   *grpc.ClientConn
	srv    *grpcapi.Server
	db     *ratedb.DB
	dir    string
	addr   string
}

func start(t *testing.T, opts *grpcapi.Options) *fixture {
	t.Helper()
	return startSkewed(t, opts, 0)
}

// startSkewed is start with the store's clock (the DB's and the core's)
// skew ahead of the server's (negative: behind).
func startSkewed(t *testing.T, opts *grpcapi.Options, skew time.Duration) *fixture {
	t.Helper()
	return startStreams(t, opts, skew, 0)
}

// startStreams is startSkewed with a gRPC server whose connections may have
// at most maxStreams calls open (0: the default).
func startStreams(t *testing.T, opts *grpcapi.Options, skew time.Duration, maxStreams uint32) *fixture {
	t.Helper()
	dir := t.TempDir()
	names, err := filepath.Glob(filepath.Join(integrationDir, "*.yaml"))
	require.NoError(t, err)
	for _, name := range names {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(name)), data, 0o600))
	}
	cfg, err := envoyconf.Load(dir)
	require.NoError(t, err)
	clock := func() time.Time { return now }
	storeClock := func() time.Time { return now.Add(skew) }
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "state.db"), &ratedb.Options{Clock: storeClock, MaxHotKeys: 10000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	o := grpcapi.Options{Clock: clock}
	if opts != nil {
		o = *opts
		o.Clock = clock
	}
	srv := grpcapi.New(core.New(core.DBStore{DB: db}, core.Options{Clock: storeClock}), cfg, &o)
	g, _ := grpcapi.NewGRPCServer(srv, nil, maxStreams)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &fixture{client: rlsv3.NewRateLimitServiceClient(conn), conn: conn, srv: srv, db: db, dir: dir, addr: lis.Addr().String()}
}

// desc builds a descriptor from key, value pairs.
func desc(pairs ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(pairs); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: pairs[i], Value: pairs[i+1]})
	}
	return d
}

func (f *fixture) call(t *testing.T, domain string, hits uint32, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs, HitsAddend: hits})
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), len(descs))
	return resp
}

// st is a compact descriptor status for comparisons.
type st struct {
	Code      rlsv3.RateLimitResponse_Code
	Requests  uint32
	Unit      rlsv3.RateLimitResponse_RateLimit_Unit
	Remaining uint32
	Reset     int64
	HasLimit  bool
}

func statuses(resp *rlsv3.RateLimitResponse) []st {
	out := make([]st, len(resp.GetStatuses()))
	for i, s := range resp.GetStatuses() {
		out[i] = st{Code: s.GetCode(), Remaining: s.GetLimitRemaining(), Reset: s.GetDurationUntilReset().GetSeconds()}
		if l := s.GetCurrentLimit(); l != nil {
			out[i].HasLimit, out[i].Requests, out[i].Unit = true, l.GetRequestsPerUnit(), l.GetUnit()
		}
	}
	return out
}

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
	sec  = rlsv3.RateLimitResponse_RateLimit_SECOND
	min_ = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour = rlsv3.RateLimitResponse_RateLimit_HOUR
)

// TestIntegrationBasic ports the answers of envoyproxy/ratelimit's
// integration test (testBasicBaseConfig), with our all-or-nothing counting.
func TestIntegrationBasic(t *testing.T) {
	f := start(t, nil)
	resp := f.call(t, "foo", 1, desc("hello", "world"))
	assert.Equal(t, ok, resp.GetOverallCode())
	assert.Equal(t, []st{{Code: ok}}, statuses(resp), "unknown domain: OK without a limit")

	resp = f.call(t, "basic", 1, desc("key1", "foo"))
	assert.Equal(t, []st{{Code: ok, HasLimit: true, Requests: 50, Unit: sec, Remaining: 49, Reset: 1}}, statuses(resp))

	for i := range 25 {
		resp = f.call(t, "another", 1, desc("key2", "42"))
		want := st{Code: ok, HasLimit: true, Requests: 20, Unit: min_, Remaining: uint32(20 - (i + 1)), Reset: 30}
		if i >= 20 {
			want.Code, want.Remaining = over, 0
		}
		assert.Equal(t, want.Code, resp.GetOverallCode(), "hit %d", i)
		assert.Equal(t, []st{want}, statuses(resp), "hit %d", i)
	}

	// Two keys in one request: once key3 is over, key2 is not counted
	// (envoyproxy/ratelimit counts it unless STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT).
	for i := range 15 {
		resp = f.call(t, "another", 1, desc("key2", "7"), desc("key3", "7"))
		w2 := st{Code: ok, HasLimit: true, Requests: 20, Unit: min_, Remaining: uint32(20 - (i + 1)), Reset: 30}
		w3 := st{Code: ok, HasLimit: true, Requests: 10, Unit: hour, Remaining: uint32(10 - (i + 1)), Reset: 3570}
		code := ok
		if i >= 10 {
			code = over
			w2.Remaining = 10
			w3.Code, w3.Remaining = over, 0
		}
		assert.Equal(t, code, resp.GetOverallCode(), "hit %d", i)
		assert.Equal(t, []st{w2, w3}, statuses(resp), "hit %d", i)
	}
}

// TestIndependentCounting is envoyproxy/ratelimit's behaviour, behind
// Options.Independent: key2 keeps counting while key3 denies.
func TestIndependentCounting(t *testing.T) {
	f := start(t, &grpcapi.Options{Independent: true})
	var resp *rlsv3.RateLimitResponse
	for i := range 15 {
		resp = f.call(t, "another", 1, desc("key2", "7"), desc("key3", "7"))
		assert.Equal(t, uint32(20-(i+1)), resp.GetStatuses()[0].GetLimitRemaining(), "hit %d", i)
	}
	assert.Equal(t, over, resp.GetOverallCode())
	assert.Equal(t, over, resp.GetStatuses()[1].GetCode())

	// A refund is one more descriptor decided on its own: applied although
	// another descriptor of the request is over its limit.
	refund := desc("key2", "7")
	refund.IsNegativeHits = true
	refund.HitsAddend = wrapperspb.UInt64(5)
	resp = f.call(t, "another", 1, refund, desc("key3", "7"))
	assert.Equal(t, over, resp.GetOverallCode())
	assert.Equal(t, uint32(10), resp.GetStatuses()[0].GetLimitRemaining(), "15 hits, 5 given back")
}

func TestHitsAddend(t *testing.T) {
	f := start(t, nil)
	remaining := func(resp *rlsv3.RateLimitResponse) uint32 { return resp.GetStatuses()[0].GetLimitRemaining() }
	assert.EqualValues(t, 19, remaining(f.call(t, "another", 0, desc("key2", "a"))), "request hits_addend 0 means 1")
	assert.EqualValues(t, 18, remaining(f.call(t, "another", 1, desc("key2", "a"))))
	assert.EqualValues(t, 13, remaining(f.call(t, "another", 5, desc("key2", "a"))))

	d := desc("key2", "a")
	d.HitsAddend = wrapperspb.UInt64(0)
	resp := f.call(t, "another", 5, d)
	assert.Equal(t, ok, resp.GetOverallCode())
	assert.EqualValues(t, 13, remaining(resp), "per-descriptor 0 checks without counting")

	d.HitsAddend = wrapperspb.UInt64(3)
	assert.EqualValues(t, 10, remaining(f.call(t, "another", 5, d)), "per-descriptor addend overrides the request's")

	resp = f.call(t, "another", 11, desc("key2", "a"))
	assert.Equal(t, over, resp.GetOverallCode(), "11 does not fit in 10")
	assert.EqualValues(t, 0, remaining(resp))
	assert.EqualValues(t, 0, remaining(f.call(t, "another", 10, desc("key2", "a"))), "a denied hit counts nothing: 10 still fit")

	d.HitsAddend = wrapperspb.UInt64(0)
	assert.Equal(t, over, f.call(t, "another", 1, d).GetOverallCode(), "a check without counting is over when one more hit would not fit")

	// Per-descriptor addends in one request.
	a, b := desc("key3", "x"), desc("key3", "y")
	a.HitsAddend, b.HitsAddend = wrapperspb.UInt64(4), wrapperspb.UInt64(0)
	resp = f.call(t, "another", 1, a, b)
	assert.Equal(t, []uint32{6, 10}, []uint32{resp.GetStatuses()[0].GetLimitRemaining(), resp.GetStatuses()[1].GetLimitRemaining()})
}

func TestNegativeHitsRefund(t *testing.T) {
	f := start(t, nil)
	remaining := func(resp *rlsv3.RateLimitResponse) uint32 { return resp.GetStatuses()[0].GetLimitRemaining() }
	assert.EqualValues(t, 0, remaining(f.call(t, "basic", 1, desc("one_per_minute", "n"))))
	assert.Equal(t, over, f.call(t, "basic", 1, desc("one_per_minute", "n")).GetOverallCode())

	refund := desc("one_per_minute", "n")
	refund.IsNegativeHits = true
	resp := f.call(t, "basic", 1, refund)
	assert.Equal(t, []st{{Code: ok, HasLimit: true, Requests: 1, Unit: min_, Remaining: 1, Reset: 30}}, statuses(resp))
	assert.Equal(t, ok, f.call(t, "basic", 1, desc("one_per_minute", "n")).GetOverallCode(), "the refunded hit is usable again")

	refund.HitsAddend = wrapperspb.UInt64(10)
	assert.EqualValues(t, 1, remaining(f.call(t, "basic", 1, refund)), "never below zero")
	assert.EqualValues(t, 1, remaining(f.call(t, "basic", 1, refund)), "a key without hits stays at zero")
}

func TestSameDescriptorTwiceCountsTwice(t *testing.T) {
	f := start(t, nil)
	resp := f.call(t, "basic", 1, desc("one_per_minute", "u"), desc("one_per_minute", "u"))
	assert.Equal(t, over, resp.GetOverallCode(), "two hits do not fit in a limit of one")
	resp = f.call(t, "basic", 1, desc("one_per_minute", "u"))
	assert.Equal(t, ok, resp.GetOverallCode(), "the denied request counted nothing")
	assert.Equal(t, over, f.call(t, "basic", 1, desc("one_per_minute", "u")).GetOverallCode())
}

func TestFeatures(t *testing.T) {
	f := start(t, nil)
	t.Run("nested wildcard and key-only", func(t *testing.T) {
		for i := range 4 {
			resp := f.call(t, "features", 1, desc("tenant", "acme", "path", "/api/orders"))
			assert.Equal(t, i < 3, resp.GetOverallCode() == ok, "hit %d", i)
			assert.EqualValues(t, 3, resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
		}
		// Each value under a wildcard has its own counter.
		assert.Equal(t, ok, f.call(t, "features", 1, desc("tenant", "acme", "path", "/api/users")).GetOverallCode())
		resp := f.call(t, "features", 1, desc("tenant", "acme", "path", "/other"))
		assert.EqualValues(t, 5, resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), "key-only fallback")
		assert.Equal(t, []st{{Code: ok}}, statuses(f.call(t, "features", 1, desc("tenant", "acme"))), "shallower than the rule")
		assert.Equal(t, []st{{Code: ok}}, statuses(f.call(t, "features", 1, desc("tenant", "other", "path", "/api/x"))), "unmatched")
	})
	t.Run("unlimited", func(t *testing.T) {
		for range 3 {
			resp := f.call(t, "features", 1, desc("free", "x"))
			assert.Equal(t, []st{{Code: ok, Remaining: math.MaxUint32}}, statuses(resp))
		}
	})
	t.Run("shadow mode counts but answers OK", func(t *testing.T) {
		var resp *rlsv3.RateLimitResponse
		for range 3 {
			resp = f.call(t, "features", 1, desc("watched", "x"))
			assert.Equal(t, ok, resp.GetOverallCode())
		}
		assert.Equal(t, []st{{Code: ok, HasLimit: true, Requests: 2, Unit: hour, Reset: 3570}}, statuses(resp), "over the limit: remaining 0")
	})
	t.Run("replaces", func(t *testing.T) {
		for range 3 {
			resp := f.call(t, "features", 1, desc("specific", "x"), desc("general", "x"))
			assert.Equal(t, ok, resp.GetOverallCode())
			assert.Nil(t, resp.GetStatuses()[1].GetCurrentLimit(), "the replaced limit is not checked")
		}
		assert.Equal(t, ok, f.call(t, "features", 1, desc("general", "x")).GetOverallCode())
		assert.Equal(t, over, f.call(t, "features", 1, desc("general", "x")).GetOverallCode())
		// An unlimited limit stays unlimited when another replaces it, as
		// envoyproxy/ratelimit's constructLimitsToCheck has it.
		resp := f.call(t, "features", 1, desc("free_named", "x"), desc("replaces_free", "x"))
		assert.Equal(t, st{Code: ok, Remaining: math.MaxUint32}, statuses(resp)[0])
	})
	t.Run("share_threshold shares one counter", func(t *testing.T) {
		assert.Equal(t, ok, f.call(t, "features", 1, desc("shared", "files/a")).GetOverallCode())
		assert.Equal(t, ok, f.call(t, "features", 1, desc("shared", "files/b")).GetOverallCode())
		assert.Equal(t, over, f.call(t, "features", 1, desc("shared", "files/c")).GetOverallCode())
	})
	t.Run("block", func(t *testing.T) {
		assert.Equal(t, over, f.call(t, "basic", 1, desc("block", "x")).GetOverallCode())
	})
}

func TestLimitOverride(t *testing.T) {
	f := start(t, nil)
	d := desc("not_configured", "x")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
	for i := range 3 {
		resp := f.call(t, "basic", 1, d)
		want := st{Code: ok, HasLimit: true, Requests: 2, Unit: min_, Remaining: uint32(1 - i), Reset: 30}
		if i == 2 {
			want.Code, want.Remaining = over, 0
		}
		assert.Equal(t, []st{want}, statuses(resp), "hit %d", i)
	}
	// It overrides a configured rule too.
	k := desc("key1", "y")
	k.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
	assert.Equal(t, []st{{Code: ok, HasLimit: true, Requests: 1, Unit: hour, Reset: 3570}}, statuses(f.call(t, "basic", 1, k)))
	// An unknown domain has no limit, override or not.
	assert.Equal(t, []st{{Code: ok}}, statuses(f.call(t, "nowhere", 1, d)))
}

func TestInvalidRequests(t *testing.T) {
	f := start(t, nil)
	badUnit := desc("key2", "secret-value-42")
	badUnit.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	many := make([]*ratelimitv3.RateLimitDescriptor, grpcapi.MaxDescriptors+1)
	for i := range many {
		many[i] = desc("key2", "secret-value-42")
	}
	cases := []struct {
		name string
		req  *rlsv3.RateLimitRequest
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("key2", "secret-value-42")}}},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "another"}},
		{"override without unit", &rlsv3.RateLimitRequest{Domain: "another", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("key2", "secret-value-42"), badUnit}}},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "another", Descriptors: many}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.ShouldRateLimit(context.Background(), tc.req)
			assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
			assert.NotContains(t, status.Convert(err).Message(), "secret-value-42", "no descriptor values in errors")
		})
	}
	assert.EqualValues(t, 19, f.call(t, "another", 1, desc("key2", "secret-value-42")).GetStatuses()[0].GetLimitRemaining(), "invalid requests counted nothing")
}

func TestReloadKeepsCountsAndRejectsInvalid(t *testing.T) {
	f := start(t, nil)
	f.call(t, "another", 1, desc("key2", "r"))
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "another.yaml"), []byte(
		"domain: another\ndescriptors:\n  - key: key2\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"), 0o600))
	require.NoError(t, f.srv.Reload(f.dir))
	resp := f.call(t, "another", 1, desc("key2", "r"))
	assert.Equal(t, []st{{Code: ok, HasLimit: true, Requests: 5, Unit: min_, Remaining: 3, Reset: 30}}, statuses(resp), "new limit, same count")

	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "bad.yaml"), []byte("domain: another\n"), 0o600))
	err := f.srv.Reload(f.dir)
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig)
	resp = f.call(t, "another", 1, desc("key2", "r"))
	assert.EqualValues(t, 2, resp.GetStatuses()[0].GetLimitRemaining(), "the previous config stays")
}

func TestStoreFailureIsUnavailable(t *testing.T) {
	f := start(t, nil)
	f.call(t, "another", 1, desc("key3", "z")) // its limiter is now resolved
	require.NoError(t, f.db.Close())
	for _, key := range []string{"key3", "key2"} {
		_, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "another", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(key, "z")}})
		assert.Equal(t, codes.Unavailable, status.Code(err), "%s: %v", key, err)
	}
	// A request that needs no store still answers.
	f.call(t, "another", 1, desc("nothing", "z"))
}

func TestHealth(t *testing.T) {
	f := start(t, nil)
	h := healthpb.NewHealthClient(f.conn)
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		require.NoError(t, err)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	}
}
