package main_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without --envoy-config, SIGHUP (a reload sent to every instance) is
// logged and ignored: it does not end the service without its final
// snapshot, as the signal's default action would.
func TestSIGHUPWithoutEnvoyConfigKeepsServing(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	args := append(longWindow, "--default-limit", "10", "--snapshot-period", "1h", "--log-format", "json")
	s := start(t, db, args...)
	for range 3 {
		s.check("c", "/r")
	}
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGHUP))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.stderr.String(), "SIGHUP: nothing to reload") {
		require.True(t, time.Now().Before(deadline), "no log of the SIGHUP:\n%s", s.stderr)
		time.Sleep(10 * time.Millisecond) // polling another process's log
	}
	for _, line := range strings.Split(strings.TrimSpace(s.stderr.String()), "\n") {
		var rec map[string]any
		if strings.Contains(line, "SIGHUP") {
			require.NoError(t, json.Unmarshal([]byte(line), &rec), "the SIGHUP line follows --log-format json: %s", line)
		}
	}
	assert.Equal(t, int64(6), s.check("c", "/r").Remain, "still serving, counts kept")
	require.Equal(t, 0, s.stop(syscall.SIGTERM))

	s = start(t, db, args...)
	assert.Equal(t, int64(5), s.check("c", "/r").Remain, "the final snapshot kept every hit")
}

// A flag given without the feature it configures has no effect: it is
// refused, naming what it needs, rather than silently ignored.
func TestFlagsWithoutTheirFeatureRefused(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--redis-timeout", "5s"}, "--redis-timeout applies only with --redis"},
		{[]string{"--log-keys"}, "--log-keys needs --log-level debug"},
		{[]string{"--log-keys", "--log-level", "warn"}, "--log-keys needs --log-level debug"},
		{[]string{"--redis", "redis://127.0.0.1:1/0", "--snapshot-period", "100ms"}, "--snapshot-period applies only to the embedded file"},
		// The loop gives --db: with --redis, the file is never opened.
		{[]string{"--redis", "redis://127.0.0.1:1/0"}, "--db applies only to the embedded file (with --redis, the counts and rules live in Redis): omit --db"},
		{[]string{"--envoy-independent"}, "--envoy-independent needs --grpc"},
		{[]string{"--envoy-config-poll", "5s"}, "need --envoy-config"},
		{[]string{"--grpc", "127.0.0.1:0", "--envoy-config-merge-domains"}, "need --envoy-config"},
		{[]string{"--grpc", "127.0.0.1:0", "--envoy-config-ignore-dotfiles"}, "need --envoy-config"},
		{[]string{"--grpc-max-concurrent-streams", "100"}, "--grpc-max-concurrent-streams needs --grpc"},
		{[]string{"--grpc", "127.0.0.1:0", "--grpc-max-concurrent-streams", "0"}, "--grpc-max-concurrent-streams must be from 1 to 4294967295"},
		{[]string{"--grpc", "127.0.0.1:0", "--grpc-max-concurrent-streams", "4294967296"}, "--grpc-max-concurrent-streams must be from 1 to 4294967295"},
	} {
		_, stderr, code := runTool(t, append([]string{"serve", "--db", db, "--http", "127.0.0.1:0"}, tc.args...)...)
		assert.Equal(t, 1, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
	assert.NoFileExists(t, db, "a refused start creates no state")
}

// Durations that would make the service spin, or skip its graceful
// shutdown, are refused with a clear message.
func TestNonsenseDurationsRefused(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	for _, tc := range []struct{ flag, value, want string }{
		{"--snapshot-period", "1ns", "--snapshot-period must be at least 1ms"},
		{"--shutdown-timeout", "-1h", "--shutdown-timeout must be positive"},
		{"--shutdown-timeout", "0s", "--shutdown-timeout must be positive"},
		{"--envoy-config-poll", "1ns", "--envoy-config-poll must be 0 (only on SIGHUP) or at least 10ms"},
	} {
		_, stderr, code := runTool(t, "serve", "--db", db, "--http", "127.0.0.1:0", tc.flag, tc.value)
		assert.Equal(t, 1, code, "%s %s", tc.flag, tc.value)
		assert.Contains(t, stderr, tc.want, "%s %s", tc.flag, tc.value)
	}
}
