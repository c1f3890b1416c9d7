package serve

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/ratedb/ratedb/redisstore"
)

// With --redis the windows are on Redis's clock (the scripts read TIME),
// and so is the time until one ends that the APIs report: an allowed
// answer's reset_in_second and duration_until_reset were measured from
// this host's clock, so a Redis whose clock is not this host's (here a
// store clock 10 s into a minute, an hour behind) made a one-minute
// window that Redis says ends in 50 s announce a reset in 1 s (or, ahead,
// one of 60 s when it ends in 10). A denial, measured from the store's
// time of the decision (ResetAt - RetryAfter), was right already.
func TestRedisResetIsOnTheStoresClock(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	anchor := time.Now().Truncate(time.Minute).Add(-time.Hour + 10*time.Second)
	start := time.Now()
	defer func(c redisstore.Clock) { testRedisClock = c }(testRedisClock)
	testRedisClock = redisstore.LocalClock(func() time.Time { return anchor.Add(time.Since(start)) })

	dir := t.TempDir()
	conf := filepath.Join(dir, "envoy.yaml")
	require.NoError(t, os.WriteFile(conf, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o600))
	c := Config{
		HTTP: "127.0.0.1:0", Redis: "redis://" + addr + "/0", RedisTimeout: 5 * time.Second,
		APIKeysEnv: "k", DefaultLimit: 1, DefaultWindow: time.Minute, DefaultAlgorithm: "fixed",
		DenyStatus: 429, LogFormat: "text", LogLevel: "info",
		SnapshotPeriod: time.Second, ShutdownTimeout: 5 * time.Second,
		Envoy: EnvoyConfig{GRPC: "127.0.0.1:0", Config: conf},
	}
	grpcAddr, out, stop, done := runGRPC(t, c)
	defer func() { close(stop); require.NoError(t, <-done) }()
	m := regexp.MustCompile(`msg=listening addr=(\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	httpAddr := m[1]

	// The store's window ends 50 s after its clock read 10 s into a minute;
	// the test takes a few seconds at most.
	inWindow := func(what string, secs int64) {
		t.Helper()
		assert.True(t, secs >= 45 && secs <= 50, "%s: %d s until the store's window ends (50 s at the start)", what, secs)
	}
	check := func() (int, int64, string) {
		req, err := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/v1/check", strings.NewReader(`{"client_id":"c","route":"/r"}`))
		require.NoError(t, err)
		req.Header.Set("X-API-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var a struct {
			Data struct {
				Reset int64 `json:"reset_in_second"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(b, &a), string(b))
		return resp.StatusCode, a.Data.Reset, resp.Header.Get("Retry-After")
	}
	code, reset, _ := check()
	require.Equal(t, http.StatusOK, code)
	inWindow("HTTP Allow", reset)
	code, reset, retry := check()
	require.Equal(t, http.StatusTooManyRequests, code)
	inWindow("HTTP Deny", reset)
	assert.Equal(t, strconv.FormatInt(reset, 10), retry)

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	call := func() *rlsv3.RateLimitResponse_DescriptorStatus {
		resp, err := client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "d",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}})
		require.NoError(t, err)
		require.Len(t, resp.Statuses, 1)
		return resp.Statuses[0]
	}
	st := call()
	require.Equal(t, rlsv3.RateLimitResponse_OK, st.Code)
	inWindow("gRPC OK", st.DurationUntilReset.GetSeconds())
	st = call()
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, st.Code)
	inWindow("gRPC OVER_LIMIT", st.DurationUntilReset.GetSeconds())
}
