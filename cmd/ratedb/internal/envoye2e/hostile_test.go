package envoye2e_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// grpcSecret is part of every descriptor value the hostile test sends: none
// may reach the log.
const grpcSecret = "SECRETgq"

// hostileYAML limits per user, /api/* paths, and a nested tenant+plan; the
// windows are years, so that no boundary falls inside the test.
const hostileYAML = `domain: edge
descriptors:
  - key: user
    rate_limit: {unit: year, requests_per_unit: 1000000}
  - key: path
    value: "/api/*"
    rate_limit: {unit: year, requests_per_unit: 1000000}
  - key: tenant
    value: acme
    descriptors:
      - key: plan
        rate_limit: {unit: year, requests_per_unit: 1000000}
`

const hostileLimit = 1000000

// rawCodec sends a rawMsg's bytes as they are (so that a request may be
// what no proto.Marshal would write) and decodes answers as protobuf. Its
// name is "proto": the call's content type is application/grpc+proto.
type rawCodec struct{}

type rawMsg []byte

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawMsg); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

func (rawCodec) Name() string { return "proto" }

const shouldRateLimit = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// grpcCase is one call of TestHostileGRPCRequests.
type grpcCase struct {
	name string
	req  *rlsv3.RateLimitRequest
	raw  rawMsg // when not nil, sent instead of req
	md   metadata.MD
	// want is the call's status code; over, for an OK call, whether the
	// answer is OVER_LIMIT.
	want codes.Code
	over bool
	// counts maps each counted key (as countKey writes it) to the hits
	// the call counts.
	counts map[string]int64
}

func countKey(entries ...string) string { return strings.Join(entries, "\x00") }

type grpcGen struct {
	rng *rand.Rand
	n   int
}

func (g *grpcGen) pick(s ...string) string { return s[g.rng.IntN(len(s))] }

func (g *grpcGen) fresh(prefix string) string {
	g.n++
	return prefix + grpcSecret + strconv.Itoa(g.n)
}

// The values valid calls count under.
var (
	users    = []string{"u1" + grpcSecret, "u2" + grpcSecret}
	apiPath  = "/api/x" + grpcSecret
	longUser = "u3" + grpcSecret + strings.Repeat("l", 100_000) // over ratedb.MaxKeyLen: counted by its hash
	// A value that is not UTF-8 (as Envoy sends a header value holding
	// obs-text bytes): counted by its bytes like any other.
	badUser = "u4\xff" + grpcSecret + "\xc3"
)

// marshalAnyStrings is proctest.MarshalAnyStrings as a rawMsg.
func marshalAnyStrings(req *rlsv3.RateLimitRequest) rawMsg {
	b, err := proctest.MarshalAnyStrings(req)
	if err != nil {
		panic(err)
	}
	return rawMsg(b)
}

// invoke calls ShouldRateLimit with req, through rawCodec when req holds a
// string that is not UTF-8.
func invoke(ctx context.Context, conn *grpc.ClientConn, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse) error {
	if _, err := proto.Marshal(req); err != nil {
		return conn.Invoke(ctx, shouldRateLimit, marshalAnyStrings(req), resp, grpc.ForceCodecV2(rawCodec{}))
	}
	return conn.Invoke(ctx, shouldRateLimit, req, resp)
}

// valid returns a descriptor that counts, and its key.
func (g *grpcGen) valid() (*ratelimitv3.RateLimitDescriptor, string) {
	switch g.rng.IntN(7) {
	case 0:
		return desc("path", apiPath), countKey("path", apiPath)
	case 6:
		return desc("user", badUser), countKey("user", badUser)
	case 1:
		return desc("tenant", "acme", "plan", users[0]), countKey("tenant", "acme", "plan", users[0])
	case 2:
		return desc("user", longUser), countKey("user", longUser)
	case 3:
		return desc("user", ""), countKey("user", "") // an empty value is a value
	default:
		u := users[g.rng.IntN(len(users))]
		return desc("user", u), countKey("user", u)
	}
}

// uncounted returns a descriptor that matches no limit.
func (g *grpcGen) uncounted() *ratelimitv3.RateLimitDescriptor {
	switch g.rng.IntN(10) {
	case 0:
		return desc("", g.fresh("v"))
	case 8:
		return desc("user\xff", g.fresh("u")) // a key that is not UTF-8
	case 9:
		return desc("path", "/other/\xed\xa0\x80"+g.fresh("p"))
	case 1:
		return desc("", "")
	case 2:
		return &ratelimitv3.RateLimitDescriptor{} // no entries
	case 3:
		return desc("user", g.fresh("u"), "deeper", "x") // deeper than the rule
	case 4:
		return desc("tenant", "acme") // the level without a limit
	case 5:
		return desc("path", "/other/"+g.fresh("p"))
	case 6:
		return desc("user"+g.fresh(""), "x")
	default:
		return desc(g.fresh("k"), g.fresh("v"))
	}
}

// invalid returns a request the service must refuse with INVALID_ARGUMENT,
// counting nothing: its valid descriptors, when it has any, name fresh
// users.
func (g *grpcGen) invalid() (string, *rlsv3.RateLimitRequest) {
	rng := g.rng
	fresh := func() *ratelimitv3.RateLimitDescriptor { return desc("user", g.fresh("u")) }
	some := func(n int) []*ratelimitv3.RateLimitDescriptor {
		var d []*ratelimitv3.RateLimitDescriptor
		for range n {
			d = append(d, fresh())
		}
		return d
	}
	switch rng.IntN(6) {
	case 0:
		return "empty domain", &rlsv3.RateLimitRequest{Descriptors: some(1 + rng.IntN(3)), HitsAddend: uint32(rng.IntN(3))}
	case 1:
		return "no descriptors", &rlsv3.RateLimitRequest{Domain: g.pick("edge", "nope", g.fresh("d"))}
	case 2:
		return "too many descriptors", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: some(65 + rng.IntN(200))}
	case 3:
		d := desc()
		for range 33 + rng.IntN(100) {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "user", Value: g.fresh("u")})
		}
		return "too many entries", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: append(some(rng.IntN(3)), d)}
	case 4:
		d := fresh()
		d.HitsAddend = wrapperspb.UInt64(math.MaxInt64 + 1 + rng.Uint64N(math.MaxInt64))
		descs := append(some(rng.IntN(3)), d)
		rng.Shuffle(len(descs), func(i, j int) { descs[i], descs[j] = descs[j], descs[i] })
		return "hits_addend over MaxInt64", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs}
	default:
		d := fresh()
		v, _ := strconv.Atoi(g.pick("0", "8", "99", "-1", "2147483647")) // UNKNOWN, or no unit at all
		unit := typev3.RateLimitUnit(v)
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(rng.IntN(10)), Unit: unit}
		return "override with unknown unit", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: append(some(rng.IntN(3)), d)}
	}
}

// garbage returns bytes that are no RateLimitRequest grpc-go can decode.
func (g *grpcGen) garbage() (string, rawMsg) {
	rng := g.rng
	switch rng.IntN(5) {
	case 0:
		// A string that is not UTF-8 (where protobuf-go stops), then a
		// fault: the rest is decoded all the same, and refused.
		bad := g.pick("\xff", "\xc3", "\xed\xa0\x80", "\xc0\xaf", "\xf8\x88\x80\x80\x80")
		r := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", g.fresh("u")+bad)}}
		b := marshalAnyStrings(r)
		tail := [][]byte{{0x12, 0x05, 0x0a}, {0x28, 0xff}, {0x0c}, {0x0f}, {0x2b}}[rng.IntN(5)]
		return "not UTF-8, then malformed", append(b, tail...)
	case 1:
		b := make([]byte, 1+rng.IntN(200))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		b[0] = 0xff // no valid tag: never a valid message by chance
		return "random bytes", rawMsg(b)
	case 2:
		b, err := proto.Marshal(&rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", g.fresh("u"))}})
		if err != nil {
			panic(err)
		}
		// Cut inside the descriptor (after the 6 bytes of the domain):
		// its length says more than follows.
		return "cut message", rawMsg(b[:7+rng.IntN(len(b)-7)])
	case 3:
		// Field 1 (domain), wire type 2, with a length beyond the message.
		return "length beyond the message", rawMsg{0x0a, 0xff, 0xff, 0xff, 0x0f, 'e'}
	default:
		// Field 1 as the start of a group (wire type 3) that never ends.
		return "unterminated group", rawMsg{0x0b, 0x12, 0x00}
	}
}

// windows reads ratedb_windows_in_memory.
func windows(t *testing.T, p *proc) float64 {
	t.Helper()
	v, ok := scrape(t, p)["ratedb_windows_in_memory"]
	require.True(t, ok, "ratedb_windows_in_memory is served")
	return v
}

// TestHostileGRPCRequests sends about 800 seeded calls, most of them
// malformed or hostile, to the real binary's Envoy rate limit service with
// a real grpc-go client: an empty domain, no descriptors, too many
// descriptors or entries, hits_addend past int64, limit overrides of
// unknown units, entries with empty keys or values, long values, domains,
// keys and values that are not UTF-8 (decided and counted like any other),
// bytes that are not protobuf (also after a string that is not UTF-8), a
// message over 1 MiB, oversized metadata, unknown methods. Each gets its
// documented status;
// refused calls count nothing (no window appears for their fresh values, and
// the exact counts of the valid ones are what the valid calls counted); the
// process stays up without a panic and logs no descriptor value.
func TestHostileGRPCRequests(t *testing.T) {
	clearOfBoundary(365*24*time.Hour, time.Minute)
	seed := uint64(20261124)
	if v := os.Getenv("RATEDB_HOSTILE_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "edge.yaml"), hostileYAML)
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--log-level", "debug")
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(8<<20)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	c := rlsv3.NewRateLimitServiceClient(conn)
	require.Zero(t, windows(t, p))

	g := &grpcGen{rng: rand.New(rand.NewPCG(seed, 0x9badc0de))}
	rng := g.rng
	var cases []grpcCase
	for len(cases) < 800 {
		switch k := rng.IntN(20); {
		case k < 5: // valid: counted, with uncounted descriptors mixed in
			counts := map[string]int64{}
			var descs []*ratelimitv3.RateLimitDescriptor
			hits := uint32(rng.IntN(3))
			for range 1 + rng.IntN(4) {
				if rng.IntN(3) == 0 {
					descs = append(descs, g.uncounted())
					continue
				}
				d, key := g.valid()
				cost := int64(max(hits, 1))
				if rng.IntN(4) == 0 {
					cost = int64(rng.IntN(3)) // 0: checked, not counted
					d.HitsAddend = wrapperspb.UInt64(uint64(cost))
				}
				counts[key] += cost
				descs = append(descs, d)
			}
			cases = append(cases, grpcCase{name: "valid", req: &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs, HitsAddend: hits}, counts: counts})
		case k < 7: // the most descriptors and entries a request may have
			counts := map[string]int64{}
			var descs []*ratelimitv3.RateLimitDescriptor
			for range 64 {
				d := desc("tenant", "acme", "plan", users[0])
				for range 15 {
					d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: g.fresh("k"), Value: g.fresh("v")})
				}
				descs = append(descs, d) // deeper than the rule: no limit
			}
			u, key := desc("user", users[1]), countKey("user", users[1])
			descs[rng.IntN(64)] = u
			counts[key] = 1
			cases = append(cases, grpcCase{name: "64 descriptors", req: &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs}, counts: counts})
		case k < 10: // matching nothing: no state
			var descs []*ratelimitv3.RateLimitDescriptor
			for range 1 + rng.IntN(5) {
				descs = append(descs, g.uncounted())
			}
			domain := g.pick("edge", "nope", g.fresh("d"), strings.Repeat("d", 10000), "edge\xff")
			if domain != "edge" && rng.IntN(2) == 0 {
				// An override in an unknown domain applies nothing.
				descs[0].Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit(rng.IntN(100))}
			}
			cases = append(cases, grpcCase{name: "uncounted", req: &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs, HitsAddend: rng.Uint32()}})
		case k < 12: // over any limit: denied, counting nothing
			d, _ := g.valid()
			req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
			switch rng.IntN(3) {
			case 0:
				req.HitsAddend = hostileLimit + 1 + uint32(rng.Int64N(math.MaxUint32-hostileLimit-1))
			case 1:
				d.HitsAddend = wrapperspb.UInt64(hostileLimit + 1 + rng.Uint64N(math.MaxInt64-hostileLimit-1))
			default:
				d.HitsAddend = wrapperspb.UInt64(math.MaxInt64)
			}
			if rng.IntN(2) == 0 {
				// With a known user beside it: all or nothing.
				v, _ := g.valid()
				req.Descriptors = append(req.Descriptors, v)
			}
			cases = append(cases, grpcCase{name: "over the limit", req: req, over: true})
		case k < 16: // invalid
			name, req := g.invalid()
			cases = append(cases, grpcCase{name: name, req: req, want: codes.InvalidArgument})
		case k < 18: // not a message grpc-go decodes: its own INTERNAL, before the service
			// (strings that are not UTF-8 are decoded all the same)
			name, raw := g.garbage()
			cases = append(cases, grpcCase{name: name, raw: raw, want: codes.Internal})
		case k < 19: // over 1 MiB
			d := desc("user", g.fresh("u")+strings.Repeat("x", 1<<20))
			cases = append(cases, grpcCase{name: "message over 1 MiB", req: &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}},
				want: codes.ResourceExhausted})
		default: // metadata over 16 KiB: grpc-go's client refuses to send it, as the server's SETTINGS ask
			d := desc("user", g.fresh("u"))
			cases = append(cases, grpcCase{name: "metadata over 16 KiB", req: &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}},
				md: metadata.Pairs("x-big", grpcSecret+strings.Repeat("m", 20<<10)), want: codes.Internal})
		}
	}

	expected := map[string]int64{}
	for i, cs := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if cs.md != nil {
			ctx = metadata.NewOutgoingContext(ctx, cs.md)
		}
		what := fmt.Sprintf("seed %d, call %d (%s)", seed, i, cs.name)
		var resp rlsv3.RateLimitResponse
		if cs.raw != nil {
			err = conn.Invoke(ctx, shouldRateLimit, cs.raw, &resp, grpc.ForceCodecV2(rawCodec{}))
		} else {
			err = invoke(ctx, conn, cs.req, &resp)
		}
		cancel()
		st := status.Convert(err)
		require.Equal(t, cs.want, st.Code(), "%s: %v", what, err)
		assert.NotContains(t, st.Message(), grpcSecret, what)
		if err != nil {
			continue
		}
		require.Len(t, resp.GetStatuses(), len(cs.req.GetDescriptors()), what)
		if cs.over {
			require.Equal(t, over, resp.GetOverallCode(), what)
		}
		for k, n := range cs.counts {
			expected[k] += n
		}
	}

	// No call but the valid ones left a window, and they counted exactly
	// their hits: checked (hits_addend 0) now, each key has the limit less
	// its hits left.
	require.Equal(t, 7, len(expected), "every counted key was used")
	assert.Equal(t, float64(len(expected)), windows(t, p), "windows in memory")
	for key, n := range expected {
		entries := strings.Split(key, "\x00")
		d := desc(entries...)
		d.HitsAddend = wrapperspb.UInt64(0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var resp rlsv3.RateLimitResponse
		err := invoke(ctx, conn, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}, &resp)
		cancel()
		require.NoError(t, err)
		assert.EqualValues(t, hostileLimit-n, resp.GetStatuses()[0].GetLimitRemaining(), "%.40q", key)
	}

	// Denied calls for values never counted leave nothing in memory (a
	// cost over the limit is denied from a read) and write nothing to the
	// file.
	for range 20 {
		d := desc("user", g.fresh("u"))
		d.HitsAddend = wrapperspb.UInt64(hostileLimit + 1 + rng.Uint64N(math.MaxInt64-hostileLimit-1))
		require.Equal(t, over, call(t, c, "edge", 0, d).GetOverallCode())
	}
	assert.Equal(t, float64(len(expected)), windows(t, p), "windows in memory after the denied calls")
	code, body := p.get(t, "/readyz") // a snapshot
	require.Equal(t, 200, code, body)
	assert.Equal(t, float64(len(expected)), scrape(t, p)["ratedb_windows_on_disk"], "windows in the file")

	// Unknown methods and health checks of unknown services.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var resp rlsv3.RateLimitResponse
	err = conn.Invoke(ctx, "/envoy.service.ratelimit.v3.RateLimitService/"+grpcSecret, &rlsv3.RateLimitRequest{}, &resp)
	assert.Equal(t, codes.Unimplemented, status.Code(err))
	err = conn.Invoke(ctx, "/"+grpcSecret+".Service/Method", &rlsv3.RateLimitRequest{}, &resp)
	assert.Equal(t, codes.Unimplemented, status.Code(err))
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: grpcSecret})
	assert.Equal(t, codes.NotFound, status.Code(err))

	select {
	case <-p.exited:
		t.Fatalf("the service exited:\n%s", p.logs.String())
	default:
	}
	p.stop(t)
	found := 0
	for _, line := range strings.Split(p.logs.String(), "\n") {
		for _, bad := range []string{grpcSecret, "panic", "goroutine ", "runtime error", "fatal error", `"level":"ERROR"`} {
			if strings.Contains(line, bad) {
				if found++; found <= 5 {
					t.Errorf("a log line holds %q: %.300s", bad, line)
				}
			}
		}
	}
	assert.Zero(t, found, "log lines holding a descriptor value or telling of a panic")
}
