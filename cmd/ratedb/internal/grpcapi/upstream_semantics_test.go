package grpcapi_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
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
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
)

// The tests of this file pin, through a real gRPC client, semantics of
// envoyproxy/ratelimit (main branch f2fb157: src/config/config_impl.go
// GetLimit, src/limiter/cache_key.go, src/utils/utilities.go
// CalculateReset) that a config moved to ratedb relies on.

// movableClock is a clock the test sets; the store and the server read it.
type movableClock struct{ ns atomic.Int64 }

func (c *movableClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *movableClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func newClock(t time.Time) *movableClock    { c := &movableClock{}; c.set(t); return c }
func (c *movableClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// startConfig serves the one config file yaml through a real gRPC
// connection, the store and the server both on clock.
func startConfig(t *testing.T, yaml string, clock *movableClock) rlsv3.RateLimitServiceClient {
	t.Helper()
	cfg, err := envoyconf.Parse([]envoyconf.File{{Name: "config.yaml", Data: []byte(yaml)}})
	require.NoError(t, err)
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "state.db"), &ratedb.Options{Clock: clock.now, MaxHotKeys: 10000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	srv := grpcapi.New(core.New(core.DBStore{DB: db}, core.Options{Clock: clock.now}), cfg, &grpcapi.Options{Clock: clock.now})
	g, _ := grpcapi.NewGRPCServer(srv, nil, 0)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

func ask(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, d *ratelimitv3.RateLimitDescriptor) st {
	t.Helper()
	resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), 1)
	return statuses(resp)[0]
}

// Every unit's windows are aligned to the Unix epoch, as envoyproxy/ratelimit
// aligns them (its cache key holds (now/divider)*divider): a week starts on
// Thursday 00:00 UTC, a month is 30 days and a year 365 days from the epoch,
// not calendar months or years. duration_until_reset is the whole seconds
// to the window's end (CalculateReset: divider - now%divider), and the count
// starts again exactly there.
func TestWindowsAlignToTheUnitEpoch(t *testing.T) {
	const config = `domain: units
descriptors:
  - {key: u, value: second, rate_limit: {unit: second, requests_per_unit: 5}}
  - {key: u, value: minute, rate_limit: {unit: minute, requests_per_unit: 5}}
  - {key: u, value: hour, rate_limit: {unit: hour, requests_per_unit: 5}}
  - {key: u, value: day, rate_limit: {unit: day, requests_per_unit: 5}}
  - {key: u, value: week, rate_limit: {unit: WEEK, requests_per_unit: 5}}
  - {key: u, value: month, rate_limit: {unit: Month, requests_per_unit: 5}}
  - {key: u, value: year, rate_limit: {unit: year, requests_per_unit: 5}}
`
	// Monday 2026-11-23 10:00:30.25 UTC.
	at := time.Date(2026, 11, 23, 10, 0, 30, 250e6, time.UTC)
	const day = 24 * time.Hour
	cases := []struct {
		unit  string
		proto rlsv3.RateLimitResponse_RateLimit_Unit
		scale time.Duration
		// reset is duration_until_reset at `at`, worked out by hand.
		reset int64
	}{
		{"second", rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second, 1},
		{"minute", rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Minute, 30},
		{"hour", rlsv3.RateLimitResponse_RateLimit_HOUR, time.Hour, 59*60 + 30},
		{"day", rlsv3.RateLimitResponse_RateLimit_DAY, day, 13*3600 + 59*60 + 30},
		// To Thursday 2026-11-26 00:00 UTC.
		{"week", rlsv3.RateLimitResponse_RateLimit_WEEK, 7 * day, 2*86400 + 13*3600 + 59*60 + 30},
		// 2026-11-23 is day 20780 since the epoch; 30-day windows end at
		// day 20790 (693 * 30), 2026-12-03, not on the 1st of December.
		{"month", rlsv3.RateLimitResponse_RateLimit_MONTH, 30 * day, 9*86400 + 13*3600 + 59*60 + 30},
		// 365-day windows end at day 20805 (57 * 365), 2026-12-18, not on
		// the 1st of January.
		{"year", rlsv3.RateLimitResponse_RateLimit_YEAR, 365 * day, 24*86400 + 13*3600 + 59*60 + 30},
	}
	for _, tc := range cases {
		t.Run(tc.unit, func(t *testing.T) {
			clock := newClock(at)
			c := startConfig(t, config, clock)
			d := desc("u", tc.unit)
			limited := func(remaining uint32, reset int64) st {
				return st{Code: ok, HasLimit: true, Requests: 5, Unit: tc.proto, Remaining: remaining, Reset: reset}
			}
			require.Equal(t, limited(4, tc.reset), ask(t, c, "units", d))
			// The hand-worked figure is upstream's formula.
			u := at.Unix()
			div := int64(tc.scale / time.Second)
			assert.Equal(t, div-u%div, tc.reset, "CalculateReset")

			end := at.Add(time.Duration(tc.reset)*time.Second - 250*time.Millisecond)
			assert.Zero(t, end.UnixNano()%int64(tc.scale), "the window ends on a multiple of the unit since the epoch")
			clock.set(end.Add(-time.Millisecond))
			assert.Equal(t, limited(3, 1), ask(t, c, "units", d), "the last millisecond of the window keeps its count")
			clock.set(end)
			assert.Equal(t, limited(4, int64(tc.scale/time.Second)), ask(t, c, "units", d), "a new window starts at the epoch multiple")
		})
	}
}

// Matching at one level, as envoyproxy/ratelimit's GetLimit has it: the
// entry with the same key and value; else the first entry in file order
// whose value has a "*" that matches (not the longest); else the key
// without a value, each value counting on its own. An entry with a value and
// no rate_limit allow-lists the value (the key-only entry is not consulted),
// and a request deeper or shallower than the rule gets no limit.
func TestMatchingPrecedenceLikeUpstream(t *testing.T) {
	const config = `domain: m
descriptors:
  - key: path
    value: /health
  - key: path
    value: /api/*/action
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    value: /api/v1/*
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 4}
  - key: user
    descriptors:
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 5}
`
	c := startConfig(t, config, newClock(now))
	limit := func(requests, remaining uint32) st {
		return st{Code: ok, HasLimit: true, Requests: requests, Unit: min_, Remaining: remaining, Reset: 30}
	}
	cases := []struct {
		name string
		desc *ratelimitv3.RateLimitDescriptor
		want st
	}{
		{"a value without rate_limit allow-lists it", desc("path", "/health"), st{Code: ok}},
		{"a wildcard in the middle", desc("path", "/api/7/action"), limit(1, 0)},
		{"the first wildcard in file order, not the longest", desc("path", "/api/v1/orders"), limit(2, 1)},
		{"a wildcard's values count separately", desc("path", "/api/v1/users"), limit(2, 1)},
		{"no wildcard matches: the key-only entry", desc("path", "/other"), limit(4, 3)},
		{"the key-only entry counts each value", desc("path", "/else"), limit(4, 3)},
		{"the same value counts on", desc("path", "/other"), limit(4, 2)},
		{"deeper than the rule", desc("path", "/other", "method", "GET"), st{Code: ok}},
		{"shallower than the rule", desc("user", "u1"), st{Code: ok}},
		{"nested under a key-only entry", desc("user", "u1", "path", "/api/x"), limit(5, 4)},
		{"an unknown key", desc("method", "GET"), st{Code: ok}},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, ask(t, c, "m", tc.desc), tc.name)
	}
}

// A descriptor's limit override carries Envoy's type.v3.RateLimitUnit, which
// has no WEEK; envoyproxy/ratelimit converts the number to its response's
// unit enum, where 7 is WEEK, so 7 is a weekly limit there and here. A
// number outside that enum makes envoyproxy/ratelimit panic
// (UnitToDivider); ratedb answers INVALID_ARGUMENT and counts nothing.
func TestLimitOverrideUnitNumbers(t *testing.T) {
	const config = "domain: o\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 9}}\n"
	at := time.Date(2026, 11, 23, 10, 0, 30, 250e6, time.UTC) // Monday
	c := startConfig(t, config, newClock(at))
	weekly := desc("k", "v")
	weekly.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit(7)}
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 2, Unit: rlsv3.RateLimitResponse_RateLimit_WEEK, Remaining: 1,
		Reset: 2*86400 + 13*3600 + 59*60 + 30}, ask(t, c, "o", weekly))

	for _, unit := range []typev3.RateLimitUnit{8, -1} {
		bad := desc("k", "v")
		bad.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: unit}
		_, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "o", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "v"), bad}})
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "unit %d: %v", unit, err)
	}
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 9, Unit: min_, Remaining: 8, Reset: 30}, ask(t, c, "o", desc("k", "v")),
		"the refused requests counted nothing")
}

// Where envoyproxy/ratelimit takes a request of any size (up to grpc-go's
// default 4 MiB message), ratedb bounds it, whatever the domain: at most
// MaxDescriptors descriptors of at most MaxEntries entries
// (INVALID_ARGUMENT) and a 1 MiB message (RESOURCE_EXHAUSTED). The bounds
// themselves are served.
func TestRequestBoundsHoldForEveryDomain(t *testing.T) {
	c := startConfig(t, "domain: b\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 9}}\n", newClock(now))
	entries := func(n int) *ratelimitv3.RateLimitDescriptor {
		d := &ratelimitv3.RateLimitDescriptor{}
		for range n {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
		}
		return d
	}
	for _, domain := range []string{"b", "unknown"} {
		assert.Equal(t, st{Code: ok}, ask(t, c, domain, entries(grpcapi.MaxEntries)), "%s: %d entries", domain, grpcapi.MaxEntries)
		_, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{entries(grpcapi.MaxEntries + 1)}})
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %d entries: %v", domain, grpcapi.MaxEntries+1, err)

		_, err = c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", strings.Repeat("v", 1<<20))}})
		assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%s: a message over 1 MiB: %v", domain, err)
	}
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 9, Unit: min_, Remaining: 8, Reset: 30}, ask(t, c, "b", desc("k", "v")),
		"the refused requests counted nothing")
}

// A limit override's unit_multiplier (Envoy's RateLimitOverride field 3,
// absent from the protos envoyproxy/ratelimit pins, which ignores it)
// stretches the window to that many units, aligned to the epoch as every
// window is: 2 per 30 s is 2 per 30 s, not 2 a second. The answer's
// current_limit carries the multiplier; overrides that differ only in it
// count apart; 0 (Envoy's proto requires at least 1) and a window past
// time.Duration's range are refused and count nothing.
func TestLimitOverrideUnitMultiplier(t *testing.T) {
	const config = "domain: o\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 9}}\n"
	at := time.Date(2026, 11, 23, 10, 0, 30, 250e6, time.UTC) // 10:00:30.25, in the window [10:00:30, 10:01:00)
	clock := newClock(at)
	c := startConfig(t, config, clock)
	override := func(requests, mult uint32, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
		d := desc("k", "v")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: requests, Unit: unit}
		d.Limit.UnitMultiplier = wrapperspb.UInt32(mult)
		return d
	}
	resp, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "o",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{override(2, 30, typev3.RateLimitUnit_SECOND)}})
	require.NoError(t, err)
	assert.Equal(t, uint32(30), resp.GetStatuses()[0].GetCurrentLimit().GetUnitMultiplier().GetValue())
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 2, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, Remaining: 1, Reset: 30},
		statuses(resp)[0])
	clock.add(10 * time.Second) // 10:00:40.25: still the same 30 s window
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 2, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, Remaining: 0, Reset: 20},
		ask(t, c, "o", override(2, 30, typev3.RateLimitUnit_SECOND)))
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, ask(t, c, "o", override(2, 30, typev3.RateLimitUnit_SECOND)).Code)
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 2, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, Remaining: 1, Reset: 20},
		ask(t, c, "o", override(2, 60, typev3.RateLimitUnit_SECOND)), "60 s is a window of its own")
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 2, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, Remaining: 1, Reset: 1},
		ask(t, c, "o", override(2, 1, typev3.RateLimitUnit_SECOND)), "a multiplier of 1 is the unit")
	clock.add(20 * time.Second) // 10:01:00.25: the next 30 s window
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 2, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, Remaining: 1, Reset: 30},
		ask(t, c, "o", override(2, 30, typev3.RateLimitUnit_SECOND)))

	zero := override(2, 1, typev3.RateLimitUnit_SECOND)
	zero.Limit.UnitMultiplier = wrapperspb.UInt32(0) // given, as 0
	for _, bad := range []*ratelimitv3.RateLimitDescriptor{zero, override(2, 1<<32-1, typev3.RateLimitUnit_YEAR)} {
		_, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "o", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", "v"), bad}})
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "unit_multiplier %d: %v", bad.Limit.GetUnitMultiplier().GetValue(), err)
	}
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 9, Unit: min_, Remaining: 8, Reset: 60}, ask(t, c, "o", desc("k", "v")),
		"the refused requests counted nothing")
}

// Overrides may use at most 1,024 window lengths besides the units (the
// store keeps every length it is asked for until it closes, so a client
// giving each descriptor a new unit_multiplier grew the process without
// end): one that needs another answers INVALID_ARGUMENT and counts nothing,
// while the lengths in use, and the units, keep working.
func TestLimitOverrideWindowLengthsAreBounded(t *testing.T) {
	const config = "domain: o\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 9}}\n  - {key: n, rate_limit: {unit: minute, requests_per_unit: 9}}\n"
	c := startConfig(t, config, newClock(time.Date(2026, 11, 23, 10, 0, 30, 0, time.UTC)))
	override := func(mult uint32, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
		d := desc("k", "v")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1 << 20, Unit: unit, UnitMultiplier: wrapperspb.UInt32(mult)}
		return d
	}
	call := func(ds ...*ratelimitv3.RateLimitDescriptor) error {
		_, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "o", Descriptors: ds})
		return err
	}
	const bound = 1024
	for first := uint32(2); first < 2+bound; first += 64 { // 2 s to 1025 s
		var ds []*ratelimitv3.RateLimitDescriptor
		for m := first; m < first+64 && m < 2+bound; m++ {
			ds = append(ds, override(m, typev3.RateLimitUnit_SECOND))
		}
		require.NoError(t, call(ds...), "multipliers from %d", first)
	}
	err := call(desc("n", "v"), override(2+bound, typev3.RateLimitUnit_SECOND))
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "a length past the bound: %v", err)
	err = call(desc("n", "v"), override(3, typev3.RateLimitUnit_HOUR))
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "3 hours, another length: %v", err)
	assert.Equal(t, st{Code: ok, HasLimit: true, Requests: 9, Unit: min_, Remaining: 8, Reset: 30}, ask(t, c, "o", desc("n", "v")),
		"the refused requests counted nothing")
	for _, d := range []*ratelimitv3.RateLimitDescriptor{
		override(30, typev3.RateLimitUnit_SECOND), // in use
		override(2, typev3.RateLimitUnit_MINUTE),  // 120 s, in use
		override(1, typev3.RateLimitUnit_DAY),     // a unit
	} {
		assert.NoError(t, call(d), "%d x %v", d.Limit.GetUnitMultiplier().GetValue(), d.Limit.GetUnit())
	}
}

// A request refused as malformed takes none of the window lengths that
// limit overrides may use, whichever descriptor is at fault and wherever it
// stands: with 1,023 lengths in use, a refused request holding an override
// of a new length leaves the 1,024th free for the next valid one. So does a
// request refused because its overrides need more lengths than are left
// (one new length would fit, two do not).
func TestRefusedRequestsTakeNoOverrideWindowLength(t *testing.T) {
	const config = "domain: o\ndescriptors:\n  - {key: k, rate_limit: {unit: minute, requests_per_unit: 9}}\n  - {key: n, rate_limit: {unit: minute, requests_per_unit: 9}}\n"
	override := func(mult uint32, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
		d := desc("k", "v")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1 << 20, Unit: unit, UnitMultiplier: wrapperspb.UInt32(mult)}
		return d
	}
	tooMuch := desc("n", "v")
	tooMuch.HitsAddend = wrapperspb.UInt64(1 << 63)
	manyEntries := &ratelimitv3.RateLimitDescriptor{}
	for i := range grpcapi.MaxEntries + 1 {
		manyEntries.Entries = append(manyEntries.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "e", Value: strings.Repeat("v", i)})
	}
	unknownUnit := override(2, typev3.RateLimitUnit_UNKNOWN)
	for name, bad := range map[string][]*ratelimitv3.RateLimitDescriptor{
		"hits_addend too large after it":    {override(1025, typev3.RateLimitUnit_SECOND), tooMuch},
		"too many entries after it":         {override(1025, typev3.RateLimitUnit_SECOND), manyEntries},
		"an override of unknown unit after": {override(1025, typev3.RateLimitUnit_SECOND), unknownUnit},
		"two new lengths, one left":         {override(1025, typev3.RateLimitUnit_SECOND), override(1027, typev3.RateLimitUnit_SECOND)},
	} {
		t.Run(name, func(t *testing.T) {
			c := startConfig(t, config, newClock(time.Date(2026, 11, 23, 10, 0, 30, 0, time.UTC)))
			call := func(ds ...*ratelimitv3.RateLimitDescriptor) error {
				_, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "o", Descriptors: ds})
				return err
			}
			for first := uint32(2); first < 1025; first += 64 { // 2 s to 1024 s: 1,023 lengths
				var ds []*ratelimitv3.RateLimitDescriptor
				for m := first; m < first+64 && m < 1025; m++ {
					ds = append(ds, override(m, typev3.RateLimitUnit_SECOND))
				}
				require.NoError(t, call(ds...), "multipliers from %d", first)
			}
			err := call(bad...)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "the malformed request: %v", err)
			assert.NoError(t, call(override(1026, typev3.RateLimitUnit_SECOND)), "the last length is still free")
		})
	}
}
