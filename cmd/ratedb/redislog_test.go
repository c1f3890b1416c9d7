package main_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
