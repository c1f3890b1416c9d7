package envoye2e_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// notUTF8YAML limits per client address and per User-Agent, as Envoy's
// remote_address and request_headers actions describe a request.
const notUTF8YAML = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: year, requests_per_unit: 3}
  - key: user_agent
    rate_limit: {unit: year, requests_per_unit: 5}
`

// TestDescriptorsThatAreNotUTF8 sends, as Envoy does, descriptor values and
// keys holding bytes that are not UTF-8 (a header value's obs-text bytes,
// copied as they are), through the real binary with a grpc-go client
// passing the bytes on. Such a value is counted by its exact bytes like any
// other: exactly the limit is allowed, the rest is OVER_LIMIT. A key that
// is not UTF-8 in one descriptor no longer fails the call, which let Envoy
// (failure_mode_deny: false) pass the request without counting its other
// descriptors: the per-address limit beside it holds.
func TestDescriptorsThatAreNotUTF8(t *testing.T) {
	clearOfBoundary(365*24*time.Hour, time.Minute)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "edge.yaml"), notUTF8YAML)
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--log-level", "debug")
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	send := func(t *testing.T, domain string, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var resp rlsv3.RateLimitResponse
		require.NoError(t, invoke(ctx, conn, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs}, &resp))
		require.Len(t, resp.GetStatuses(), len(descs))
		return &resp
	}

	t.Run("a value is counted by its bytes", func(t *testing.T) {
		ua := "curl/8\xff" + grpcSecret // what Envoy sends for a header holding 0xFF
		for i := range 8 {
			resp := send(t, "edge", desc("user_agent", ua))
			if i < 5 {
				require.Equal(t, ok, resp.GetOverallCode(), "call %d", i)
				assert.EqualValues(t, 4-i, remaining(resp, 0), "call %d", i)
			} else {
				require.Equal(t, over, resp.GetOverallCode(), "call %d", i)
			}
		}
		// Other bytes, and the UTF-8 value that replaces them by U+FFFD,
		// are other values with counts of their own.
		for _, other := range []string{"curl/8\xfe" + grpcSecret, "curl/8\uFFFD" + grpcSecret, "curl/8" + grpcSecret} {
			resp := send(t, "edge", desc("user_agent", other))
			assert.Equal(t, ok, resp.GetOverallCode(), "%q", other)
			assert.EqualValues(t, 4, remaining(resp, 0), "%q", other)
		}
	})

	t.Run("a key that is not UTF-8 does not open the request", func(t *testing.T) {
		ip := desc("remote_address", "192.0.2.7")
		junk := desc("x-junk\xc3"+grpcSecret, "v\xff") // matches no rule
		for i := range 5 {
			resp := send(t, "edge", ip, junk)
			if i < 3 {
				require.Equal(t, ok, resp.GetOverallCode(), "call %d", i)
				assert.EqualValues(t, 2-i, remaining(resp, 0), "call %d", i)
			} else {
				require.Equal(t, over, resp.GetOverallCode(), "call %d", i)
			}
			assert.Nil(t, resp.GetStatuses()[1].GetCurrentLimit(), "call %d", i)
		}
	})

	t.Run("a domain that is not UTF-8 is another domain", func(t *testing.T) {
		resp := send(t, "edge\xff", desc("remote_address", "192.0.2.8"))
		assert.Equal(t, ok, resp.GetOverallCode())
		assert.Nil(t, resp.GetStatuses()[0].GetCurrentLimit())
	})

	p.stop(t)
	for _, line := range strings.Split(p.logs.String(), "\n") {
		assert.NotContains(t, line, grpcSecret)
	}
}

// TestRuleNotUTF8InMetrics: a config entry whose value is not UTF-8 (given
// as !!binary) is matched by a descriptor holding those bytes, and its path,
// the rule label of the metrics, is served with each such byte as \xNN. The
// path used to be passed to client_golang as it is, which panics on a label
// value that is not UTF-8: the first call that matched the entry ended the
// process.
func TestRuleNotUTF8InMetrics(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "edge.yaml"), `domain: edge
descriptors:
  - key: user_agent
    value: !!binary Y3VybP8=
    rate_limit: {unit: hour, requests_per_unit: 10}
`) // the value is "curl\xff"
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir)
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var resp rlsv3.RateLimitResponse
		err := invoke(ctx, conn, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user_agent", "curl\xff")}}, &resp)
		cancel()
		require.NoError(t, err, "call %d", i)
		require.Equal(t, ok, resp.GetOverallCode(), "call %d", i)
		require.EqualValues(t, 10, resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), "call %d: the entry matched", i)
	}
	m := scrape(t, p)
	assert.Equal(t, 2.0, m[`ratedb_checks_total{api="envoy",decision="allow",rule="edge.user_agent_curl\\xff"}`], "%v", m)
	p.stop(t)
}

// TestRuleNameNotUTF8IsRefused: a rate_limit whose name is not UTF-8 (given
// as !!binary) is refused at load, at start and on a reload, with an error
// naming the field and the entry. Loaded, its name went into every answer's
// current_limit, a proto3 string that protobuf-go will not marshal: grpc-go
// answered each call matching it INTERNAL, which Envoy's default
// failure_mode_deny: false lets through uncounted (envoyproxy/ratelimit
// loads such a name and fails the same way at every such call). An
// unlimited entry, whose name no answer carries, still loads with one.
func TestRuleNameNotUTF8IsRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	const unlimited = `  - key: health
    rate_limit: {unlimited: true, name: !!binary aOk=}
` // the name is "h\xe9"
	writeFile(t, file, "domain: edge\ndescriptors:\n  - key: user_agent\n    rate_limit: {unit: hour, requests_per_unit: 2, name: ua}\n"+unlimited)
	badYAML := "domain: edge\ndescriptors:\n  - key: user_agent\n    rate_limit: {unit: hour, requests_per_unit: 7, name: !!binary dWH/}\n" + unlimited // "ua\xff"
	const refusal = `rate_limit name of descriptor "edge.user_agent" is not valid UTF-8`

	t.Run("a reload keeps the previous config", func(t *testing.T) {
		p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--envoy-config-poll", "0")
		c := p.client(t, nil)
		clearOfBoundary(time.Hour, 10*time.Second)
		resp := call(t, c, "edge", 1, desc("health", "x"))
		assert.Equal(t, ok, resp.GetOverallCode())
		assert.EqualValues(t, uint32(math.MaxUint32), remaining(resp, 0), "the unlimited entry with its name loaded")

		writeFile(t, file, badYAML)
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
		eventually(t, "the reload", func() bool {
			return strings.Contains(p.logs.String(), "reload failed") || strings.Count(p.logs.String(), "envoy config: loaded") > 1
		})
		assert.Contains(t, p.logs.String(), "reload failed, keeping the previous config")
		assert.Contains(t, p.logs.String(), strings.ReplaceAll(refusal, `"`, `\"`), "the JSON log names the field and the entry")
		for i := range 3 {
			resp := call(t, c, "edge", 1, desc("user_agent", "curl"))
			st := resp.GetStatuses()[0]
			assert.EqualValues(t, 2, st.GetCurrentLimit().GetRequestsPerUnit(), "call %d: the previous limit", i)
			assert.Equal(t, "ua", st.GetCurrentLimit().GetName(), "call %d", i)
			if i < 2 {
				assert.Equal(t, ok, resp.GetOverallCode(), "call %d", i)
			} else {
				assert.Equal(t, over, resp.GetOverallCode(), "call %d", i)
			}
		}
		p.stop(t)
	})

	t.Run("a start is refused", func(t *testing.T) {
		writeFile(t, file, badYAML)
		out, err := execServe(t, "--db", filepath.Join(t.TempDir(), "s.db"), "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--envoy-config", dir)
		require.Error(t, err)
		assert.Contains(t, out, "edge.yaml: "+refusal)
		assert.NotContains(t, out, "ua\xff", "the name is not written raw")
	})
}
