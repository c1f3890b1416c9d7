package serve

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
)

// Run returns only once the rules reload loop has stopped: a reload in
// flight at shutdown must not go on after Run has returned, and, ended by
// the stop (it meets the closed Redis client), it logs no warning. (Found
// by mutation testing: this test looked for a warning the service no
// longer writes, so returning before the reload loop ended passed it.)
func TestRunWaitsForRulesReloadAtShutdown(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	defer func(p time.Duration) { rulesReloadPeriod, testBeforeReload = p, nil }(rulesReloadPeriod)
	rulesReloadPeriod = 10 * time.Millisecond
	inflight, release := make(chan struct{}), make(chan struct{})
	first := true
	testBeforeReload = func() { // the reload goroutine only
		if first {
			first = false
			close(inflight)
			<-release
		}
	}
	c := Config{
		HTTP: "127.0.0.1:0", Redis: "redis://" + addr + "/0", RedisTimeout: 100 * time.Millisecond,
		APIKeysEnv: "k", DefaultLimit: 10, DefaultWindow: time.Minute, DefaultAlgorithm: "fixed",
		DenyStatus: 200, LogFormat: "text", LogLevel: "info",
		SnapshotPeriod: time.Second, ShutdownTimeout: 5 * time.Second,
	}
	var out proctest.SyncBuffer
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- Run(c, &out, stop) }()
	<-inflight
	close(stop)
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) while a reload was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-done)
	// The reload loop's warnings all start so ("reloading the rules: what
	// could not be read keeps its current version" for a closed client).
	require.NotContains(t, out.String(), "reloading the rules", "a reload ended by the stop logged a warning")
	require.True(t, strings.Contains(out.String(), "stopped"), out.String())
}

// A reread of the rules that Redis does not answer (every command held by
// a CLIENT PAUSE ALL, as a hung or overloaded server holds it) does not
// hold the stop: Run ends it by closing the Redis client, where it waited
// for it to give up, whatever --shutdown-timeout says (its bound is ten
// times --redis-timeout, 20 s here, and go-redis's read timeouts end it
// after about 10 s), and the reread ended so logs no warning.
func TestStopEndsARulesReloadRedisDoesNotAnswer(t *testing.T) {
	addr, _ := proctest.StartRedis(t)
	defer func(p time.Duration) { rulesReloadPeriod, testBeforeReload = p, nil }(rulesReloadPeriod)
	rulesReloadPeriod = 10 * time.Millisecond
	pauser := redis.NewClient(&redis.Options{Addr: addr})
	defer pauser.Close()
	inflight := make(chan struct{})
	var pauseErr error
	first := true
	testBeforeReload = func() { // the reload goroutine only
		if first {
			first = false
			// Far past the reread's bound; the server is killed at cleanup.
			pauseErr = pauser.Do(context.Background(), "CLIENT", "PAUSE", 120_000, "ALL").Err()
			close(inflight)
		}
	}
	c := Config{
		HTTP: "127.0.0.1:0", Redis: "redis://" + addr + "/0", RedisTimeout: 2 * time.Second,
		APIKeysEnv: "k", DefaultLimit: 10, DefaultWindow: time.Minute, DefaultAlgorithm: "fixed",
		DenyStatus: 200, LogFormat: "text", LogLevel: "info",
		SnapshotPeriod: time.Second, ShutdownTimeout: time.Second,
	}
	var out proctest.SyncBuffer
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- Run(c, &out, stop) }()
	<-inflight
	require.NoError(t, pauseErr)
	close(stop)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second): // --shutdown-timeout is 1 s, and nothing is in flight
		t.Fatal("Run has not returned 5 s after the stop: it waits for a rules reread Redis does not answer")
	}
	assert.NotContains(t, out.String(), "reloading the rules", "a reread ended by the stop is no failure")
	assert.Contains(t, out.String(), "stopped")
}
