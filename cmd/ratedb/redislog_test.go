package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// With --log-format json every line the service writes to stderr is a JSON
// object, also while Redis is down: the Redis client's own messages (a
// failed dial) go through the service's logger, not straight to stderr in
// go-redis's "redis: DATE FILE:LINE: ..." format. And requests that fail
// while Redis is down do not write a line each: the log gets about one a
// second of each kind.
func TestRedisDownLogsAreJSON(t *testing.T) {
	t.Parallel()
	addr, kill := proctest.StartRedis(t)
	s := start(t, "", "--redis", "redis://"+addr+"/0", "--log-format", "json")
	assert.Equal(t, "Allow", s.check("c", "/r").Status)
	kill()
	start := time.Now()
	for range 30 {
		code, _, body := s.do("POST", "/v1/check", clientKey, `{"client_id":"c","route":"/r"}`)
		require.Equal(t, http.StatusServiceUnavailable, code, body)
	}
	// One line a second of each kind, and one more for a line written
	// just before the loop (a dial that failed once Redis was gone).
	most := 2 + int(time.Since(start)/time.Second)
	t.Logf("after 30 failed checks: %d store lines, %d Redis client lines", strings.Count(s.stderr.String(), "store failed"), strings.Count(s.stderr.String(), "redis client"))
	assert.LessOrEqual(t, strings.Count(s.stderr.String(), "store failed"), most, "a line a failed check")
	assert.LessOrEqual(t, strings.Count(s.stderr.String(), "redis client"), most, "a Redis client line a failed check")
	code, _, _ := s.do("GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	s.stop(15) // SIGTERM
	for _, line := range strings.Split(strings.TrimSpace(s.stderr.String()), "\n") {
		var v map[string]any
		assert.NoError(t, json.Unmarshal([]byte(line), &v), "not a JSON log line: %s", line)
	}
}

// --log-format takes its value in any case, as --log-level does: JSON and
// Warn were refused, json and warn accepted, and a configuration written
// with the level's case for both did not start.
func TestLogFormatAndLevelInAnyCase(t *testing.T) {
	t.Parallel()
	s := start(t, filepath.Join(t.TempDir(), "s.db"), "--log-format", "JSON", "--log-level", "Info")
	assert.Equal(t, "Allow", s.check("c", "/r").Status)
	assert.Equal(t, 0, s.stop(15), "SIGTERM: a graceful stop")
	out := strings.TrimSpace(s.stderr.String())
	require.NotEmpty(t, out)
	for _, line := range strings.Split(out, "\n") {
		var v map[string]any
		assert.NoError(t, json.Unmarshal([]byte(line), &v), "not a JSON log line: %s", line)
	}
}

// A Redis whose scripting commands are renamed away (rename-command, as
// hardening guides and some managed services do) answers every check with
// "ERR unknown command 'evalsha', with args beginning with: ...", quoting
// the command's arguments, the counter's Redis key among them, which holds
// the client id or the descriptor's value. A check gets 503 and an Envoy
// call UNAVAILABLE, and the log its "store failed" lines with Redis's
// error, as the README says, but never the client id or the value. (Redis
// quotes an argument only up to its first NUL, and every Envoy key starts
// with one, so only the HTTP API's client id was ever quoted; the Envoy
// call is checked all the same.)
func TestRedisErrorQuotingArgumentsLogsNoKey(t *testing.T) {
	t.Parallel()
	addr, free := proctest.StartRedis(t)
	free() // only its port is wanted
	proctest.StartRedisAt(t, addr, t.TempDir(), "--save", "", "--appendonly", "no",
		"--rename-command", "EVALSHA", "", "--rename-command", "EVAL", "")
	conf := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(conf, "c.yaml"), []byte(
		"domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n"), 0o600))
	s := start(t, "", "--redis", "redis://"+addr+"/0", "--redis-timeout", "5s", "--grpc", "127.0.0.1:0", "--envoy-config", conf)

	code, _, body := s.do("POST", "/v1/check", clientKey, `{"client_id":"alice@example.com","route":"/login"}`)
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	assert.NotContains(t, body, "alice")

	m := grpcAddrRE.FindStringSubmatch(s.stderr.String())
	require.NotNil(t, m, "the gRPC address in the log:\n%s", s.stderr)
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain: "d",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "bob@example.com"}},
		}},
	})
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	assert.NotContains(t, err.Error(), "bob")

	s.stop(15) // SIGTERM: every line is written
	out := s.stderr.String()
	require.Contains(t, out, "check failed: the store failed", "the HTTP check's failure is logged")
	require.Contains(t, out, "envoy rate limit: store failed", "the Envoy call's failure is logged")
	assert.Contains(t, out, "unknown command", "Redis's error is logged")
	assert.NotContains(t, out, "alice", "the client id is logged")
	assert.NotContains(t, out, "bob", "the descriptor's value is logged")
}
