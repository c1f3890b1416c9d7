package serve

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
)

// Run returns only once the rules reload loop has stopped: a reload in
// flight at shutdown must neither meet a closed Redis client nor go on
// after Run has returned. (Found by mutation testing: this test looked for
// a warning the service no longer writes, so closing the store before the
// reload loop ended passed it.)
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
	require.NotContains(t, out.String(), "reloading the rules", "the reload met a closed client")
	require.True(t, strings.Contains(out.String(), "stopped"), out.String())
}
