package envoye2e_test

import (
	"context"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// configDir copies the configs ported from envoyproxy/ratelimit's
// integration tests (plus features.yaml) into a fresh directory.
func configDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	names, err := filepath.Glob("../envoyconf/testdata/integration/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for _, name := range names {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		writeFile(t, filepath.Join(dir, filepath.Base(name)), string(data))
	}
	return dir
}

func remaining(resp *rlsv3.RateLimitResponse, i int) uint32 {
	return resp.GetStatuses()[i].GetLimitRemaining()
}

// TestProtocol drives the real binary through the protocol's features.
func TestProtocol(t *testing.T) {
	clearOfBoundary(time.Hour, 10*time.Second) // hour limits below
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", configDir(t))
	c := p.client(t, nil)

	t.Run("unknown domain and unmatched descriptor", func(t *testing.T) {
		resp := call(t, c, "foo", 1, desc("hello", "world"))
		assert.Equal(t, ok, resp.GetOverallCode())
		assert.Nil(t, resp.GetStatuses()[0].GetCurrentLimit())
		assert.Nil(t, call(t, c, "basic", 1, desc("nothing", "x")).GetStatuses()[0].GetCurrentLimit())
	})
	t.Run("single descriptor", func(t *testing.T) {
		clearOfBoundary(time.Minute, 5*time.Second)
		resp := call(t, c, "basic", 1, desc("key1", "foo"))
		st := resp.GetStatuses()[0]
		assert.Equal(t, ok, st.GetCode())
		assert.EqualValues(t, 50, st.GetCurrentLimit().GetRequestsPerUnit())
		assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_SECOND, st.GetCurrentLimit().GetUnit())
		assert.EqualValues(t, 49, st.GetLimitRemaining())
		assert.EqualValues(t, 1, st.GetDurationUntilReset().GetSeconds())
		for i := range 22 {
			resp = call(t, c, "another", 1, desc("key2", "k"))
			if i < 20 {
				assert.Equal(t, ok, resp.GetOverallCode(), "hit %d", i)
				assert.EqualValues(t, 19-i, remaining(resp, 0))
			} else {
				assert.Equal(t, over, resp.GetOverallCode(), "hit %d", i)
				assert.EqualValues(t, 0, remaining(resp, 0))
			}
			reset := resp.GetStatuses()[0].GetDurationUntilReset().GetSeconds()
			assert.True(t, reset >= 1 && reset <= 60, "reset %d", reset)
		}
	})
	t.Run("nested and wildcard", func(t *testing.T) {
		for i := range 4 {
			resp := call(t, c, "features", 1, desc("tenant", "acme", "path", "/api/orders"))
			assert.Equal(t, i < 3, resp.GetOverallCode() == ok, "hit %d", i)
			assert.EqualValues(t, 3, resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
		}
		resp := call(t, c, "features", 1, desc("tenant", "acme", "path", "/other"))
		assert.EqualValues(t, 5, resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
	})
	t.Run("unlimited", func(t *testing.T) {
		resp := call(t, c, "features", 1, desc("free", "x"))
		assert.EqualValues(t, uint32(math.MaxUint32), remaining(resp, 0))
		assert.Nil(t, resp.GetStatuses()[0].GetCurrentLimit())
	})
	t.Run("shadow mode", func(t *testing.T) {
		for range 3 {
			assert.Equal(t, ok, call(t, c, "features", 1, desc("watched", "x")).GetOverallCode())
		}
	})
	t.Run("hits_addend", func(t *testing.T) {
		assert.EqualValues(t, 9, remaining(call(t, c, "another", 0, desc("key3", "h")), 0), "0 means 1")
		assert.EqualValues(t, 8, remaining(call(t, c, "another", 1, desc("key3", "h")), 0))
		assert.EqualValues(t, 4, remaining(call(t, c, "another", 4, desc("key3", "h")), 0))
		d := desc("key3", "h")
		d.HitsAddend = wrapperspb.UInt64(0)
		assert.EqualValues(t, 4, remaining(call(t, c, "another", 4, d), 0), "per-descriptor 0: check only")
		d.HitsAddend = wrapperspb.UInt64(2)
		assert.EqualValues(t, 2, remaining(call(t, c, "another", 4, d), 0), "per-descriptor overrides the request")
	})
	t.Run("limit override", func(t *testing.T) {
		d := desc("anything", "o")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
		assert.Equal(t, ok, call(t, c, "basic", 1, d).GetOverallCode())
		resp := call(t, c, "basic", 1, d)
		assert.Equal(t, over, resp.GetOverallCode())
		assert.Equal(t, rlsv3.RateLimitResponse_RateLimit_HOUR, resp.GetStatuses()[0].GetCurrentLimit().GetUnit())
	})
	t.Run("is_negative_hits refunds", func(t *testing.T) {
		clearOfBoundary(time.Minute, 5*time.Second)
		assert.EqualValues(t, 0, remaining(call(t, c, "basic", 1, desc("one_per_minute", "neg")), 0))
		refund := desc("one_per_minute", "neg")
		refund.IsNegativeHits = true
		assert.EqualValues(t, 1, remaining(call(t, c, "basic", 1, refund), 0))
		assert.Equal(t, ok, call(t, c, "basic", 1, desc("one_per_minute", "neg")).GetOverallCode())
	})
	t.Run("several descriptors are all-or-nothing", func(t *testing.T) {
		clearOfBoundary(time.Minute, 5*time.Second)
		for i := range 12 {
			resp := call(t, c, "another", 1, desc("key2", "m"), desc("key3", "m"))
			if i < 10 {
				assert.Equal(t, ok, resp.GetOverallCode(), "hit %d", i)
				assert.EqualValues(t, 19-i, remaining(resp, 0))
			} else {
				assert.Equal(t, over, resp.GetOverallCode(), "hit %d", i)
				assert.Equal(t, ok, resp.GetStatuses()[0].GetCode())
				assert.Equal(t, over, resp.GetStatuses()[1].GetCode())
				assert.EqualValues(t, 10, remaining(resp, 0), "key2 counted nothing for a denied request")
			}
		}
	})
	t.Run("invalid request", func(t *testing.T) {
		_, err := c.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "basic"})
		assert.Equal(t, codes.InvalidArgument, status.Code(err))
	})
	t.Run("rules listed read-only", func(t *testing.T) {
		code, body := p.get(t, "/v1/rules")
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, `"envoy":[`)
		assert.Contains(t, body, `"domain":"features"`)
		assert.Contains(t, body, `"read_only":true`)
	})
}

// TestIndependentFlag checks --envoy-independent: descriptors count on
// their own, as in envoyproxy/ratelimit.
func TestIndependentFlag(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", configDir(t), "--envoy-independent")
	c := p.client(t, nil)
	clearOfBoundary(time.Minute, 5*time.Second)
	var resp *rlsv3.RateLimitResponse
	for range 12 {
		resp = call(t, c, "another", 1, desc("key2", "m"), desc("key3", "m"))
	}
	assert.Equal(t, over, resp.GetOverallCode())
	assert.EqualValues(t, 8, remaining(resp, 0), "key2 counted all 12 hits")
}

// TestRestartKeepsCounts: SIGTERM writes a final snapshot; after SIGKILL,
// what the last snapshot (forced by /readyz) held is kept.
func TestRestartKeepsCounts(t *testing.T) {
	clearOfBoundary(24*time.Hour, 60*time.Second) // a day limit
	db := filepath.Join(t.TempDir(), "state.db")
	cfg := configDir(t)
	p := startProc(t, db, "--envoy-config", cfg)
	c := p.client(t, nil)
	call(t, c, "another", 3, desc("daily", "r"))
	p.stop(t)

	p = startProc(t, db, "--envoy-config", cfg)
	c = p.client(t, nil)
	assert.EqualValues(t, 1, remaining(call(t, c, "another", 1, desc("daily", "r")), 0), "after SIGTERM")
	code, body := p.get(t, "/readyz") // snapshots the state file
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited

	p = startProc(t, db, "--envoy-config", cfg)
	c = p.client(t, nil)
	resp := call(t, c, "another", 1, desc("daily", "r"))
	assert.Equal(t, ok, resp.GetOverallCode(), "after SIGKILL")
	assert.EqualValues(t, 0, remaining(resp, 0), "after SIGKILL")
	assert.Equal(t, over, call(t, c, "another", 1, desc("daily", "r")).GetOverallCode())
}

// TestReload: SIGHUP and a file change apply a new config; an invalid one
// keeps the previous config and says why in the log.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	limitYAML := func(n int) string {
		return "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: " + string(rune('0'+n)) + "}\n"
	}
	writeFile(t, file, limitYAML(1))

	t.Run("SIGHUP", func(t *testing.T) {
		p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--envoy-config-poll", "0")
		c := p.client(t, nil)
		clearOfBoundary(time.Hour, 10*time.Second) // the counts below stay in one hour
		assert.Equal(t, ok, call(t, c, "edge", 1, desc("user", "u")).GetOverallCode())
		assert.Equal(t, over, call(t, c, "edge", 1, desc("user", "u")).GetOverallCode())
		writeFile(t, file, limitYAML(3))
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
		eventually(t, "the SIGHUP reload", func() bool {
			return call(t, c, "edge", 1, desc("user", "probe")).GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == 3
		})
		resp := call(t, c, "edge", 1, desc("user", "u"))
		assert.Equal(t, ok, resp.GetOverallCode(), "the count (1) is kept under the new limit")
		assert.EqualValues(t, 1, remaining(resp, 0))
	})
	t.Run("file change and invalid file", func(t *testing.T) {
		writeFile(t, file, limitYAML(1))
		p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--envoy-config-poll", "50ms")
		c := p.client(t, nil)
		writeFile(t, file, limitYAML(4))
		eventually(t, "the file-change reload", func() bool {
			return call(t, c, "edge", 1, desc("user", "probe")).GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == 4
		})
		writeFile(t, file, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 9}\n")
		eventually(t, "the failed reload to be logged", func() bool {
			return strings.Contains(p.logs.String(), "reload failed, keeping the previous config")
		})
		assert.Contains(t, p.logs.String(), "invalid rate limit unit")
		assert.EqualValues(t, 4, call(t, c, "edge", 1, desc("user", "x")).GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
		assert.NotContains(t, p.logs.String(), `"probe"`, "descriptor values are never logged")
	})
}

// TestBadConfigRefusesToStart: an invalid --envoy-config at start is an
// error, not an empty config. It is read before the state is opened, as
// the keys, rules and TLS files are: the refused start creates no state
// file and imports no --rules file into one (with --redis, into the rules
// every instance shares), and prints no development key.
func TestBadConfigRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "domain: a\ndescriptors:\n  - key: k\n    ratelimit: {}\n")
	state := t.TempDir()
	db := filepath.Join(state, "s.db")
	rulesFile := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(rulesFile, []byte("rules:\n  - {name: r, client_id: \"*\", route: \"*\", limit: 1, window: 1m}\n"), 0o600))
	out, err := execServe(t, "--db", db, "--rules", rulesFile, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--envoy-config", dir)
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, out)
	assert.Equal(t, 1, ee.ExitCode(), out)
	assert.Contains(t, out, `--envoy-config: `)
	assert.Contains(t, out, `unknown key (did you mean rate_limit?)`)
	assert.NotContains(t, out, "imported rules")
	assert.NotContains(t, out, "listening")
	left, err := os.ReadDir(state)
	require.NoError(t, err)
	assert.Empty(t, left, "the refused start created no state file and no rules file")

	// Without a key, the development key is not generated for a start
	// that is refused.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := execCommand(ctx, "serve", "--db", db, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--envoy-config", dir)
	b, err := cmd.CombinedOutput()
	require.ErrorAs(t, err, &ee, string(b))
	assert.NotContains(t, string(b), "X-API-Key")
	assert.Contains(t, string(b), `unknown key (did you mean rate_limit?)`)
	_, err = os.Stat(db)
	assert.True(t, os.IsNotExist(err), "no state file created")
}

// TestMergeDomainsFlag: --envoy-config-merge-domains loads a domain
// declared in two files, as MERGE_DOMAIN_CONFIG=true does; without it the
// service refuses to start.
func TestMergeDomainsFlag(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "domain: m\ndescriptors:\n  - {key: a, rate_limit: {unit: hour, requests_per_unit: 1}}\n")
	writeFile(t, filepath.Join(dir, "b.yaml"), "domain: m\ndescriptors:\n  - {key: b, rate_limit: {unit: hour, requests_per_unit: 2}}\n")
	out, err := execServe(t, "--db", filepath.Join(t.TempDir(), "s.db"), "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--envoy-config", dir)
	require.Error(t, err)
	assert.Contains(t, out, `b.yaml: duplicate domain "m"`)

	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--envoy-config-merge-domains")
	c := p.client(t, nil)
	clearOfBoundary(time.Hour, 10*time.Second)
	resp := call(t, c, "m", 1, desc("a", "x"))
	assert.EqualValues(t, 1, resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), "a.yaml's limit")
	resp = call(t, c, "m", 1, desc("b", "x"))
	assert.EqualValues(t, 2, resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), "b.yaml's limit")
	assert.EqualValues(t, 1, remaining(resp, 0))
}

// TestQuotaModeAndMetadata drives the quota_mode and metadata entries of
// envoyproxy/ratelimit's own example config (examples/ratelimit/config,
// July 2026) through the binary: a request draws on whichever of its quotas
// has room, and is over the limit once every one is.
func TestQuotaModeAndMetadata(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "quota.yaml"), `domain: rl
descriptors:
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
    metadata:
      service_with_quota: {name: "service_1"}
  - key: service
    value: service_2
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
    metadata:
      service_with_quota: {name: "service_2"}
`)
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir)
	c := p.client(t, nil)
	clearOfBoundary(time.Hour, 10*time.Second)
	codes := func(resp *rlsv3.RateLimitResponse) []rlsv3.RateLimitResponse_Code {
		var out []rlsv3.RateLimitResponse_Code
		for _, st := range resp.GetStatuses() {
			out = append(out, st.GetCode())
		}
		return out
	}
	both := func() *rlsv3.RateLimitResponse {
		return call(t, c, "rl", 1, desc("service", "service_1"), desc("service", "service_2"))
	}
	resp := both()
	assert.Equal(t, ok, resp.GetOverallCode())
	resp = both()
	assert.Equal(t, ok, resp.GetOverallCode(), "service_2 has room")
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, ok}, codes(resp))
	resp = both()
	assert.Equal(t, over, resp.GetOverallCode(), "every quota is used up")
	assert.Equal(t, []rlsv3.RateLimitResponse_Code{over, over}, codes(resp))
}

// TestGlobalModeFlags: --envoy-shadow-mode (SHADOW_MODE=true) answers OK
// overall whatever the limits decide; --envoy-quota-mode (QUOTA_MODE=true)
// makes every limit a quota_mode one.
func TestGlobalModeFlags(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "g.yaml"), "domain: g\ndescriptors:\n  - {key: a, rate_limit: {unit: hour, requests_per_unit: 1}}\n  - {key: b, rate_limit: {unit: hour, requests_per_unit: 2}}\n")
	clearOfBoundary(time.Hour, 10*time.Second)

	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--envoy-shadow-mode")
	c := p.client(t, nil)
	call(t, c, "g", 1, desc("a", "x"))
	resp := call(t, c, "g", 1, desc("a", "x"))
	assert.Equal(t, ok, resp.GetOverallCode(), "shadow mode")
	assert.Equal(t, over, resp.GetStatuses()[0].GetCode())
	p.stop(t)

	p = startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--envoy-quota-mode")
	c = p.client(t, nil)
	call(t, c, "g", 1, desc("a", "x"), desc("b", "x"))
	assert.Equal(t, ok, call(t, c, "g", 1, desc("a", "x"), desc("b", "x")).GetOverallCode(), "b's quota has room")
	assert.Equal(t, over, call(t, c, "g", 1, desc("a", "x"), desc("b", "x")).GetOverallCode(), "both quotas used up")

	out, err := execServe(t, "--db", filepath.Join(t.TempDir(), "s.db"), "--http", "127.0.0.1:0", "--envoy-shadow-mode")
	require.Error(t, err)
	assert.Contains(t, out, "need --grpc")
}

func execServe(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := execCommand(ctx, append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), "RATEDB_API_KEYS=e2e-client-key-0123456789")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
