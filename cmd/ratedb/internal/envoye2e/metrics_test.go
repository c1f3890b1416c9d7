package envoye2e_test

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape returns the samples /metrics serves, by name and labels as the
// text format writes them.
func scrape(t *testing.T, p *proc) map[string]float64 {
	t.Helper()
	code, body := p.get(t, "/metrics")
	require.Equal(t, http.StatusOK, code)
	samples := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		samples[line[:i]] = v
	}
	return samples
}

const (
	reloadsOK      = `ratedb_envoy_config_reloads_total{result="success"}`
	reloadsFailed  = `ratedb_envoy_config_reloads_total{result="error"}`
	lastSuccessful = `ratedb_envoy_config_last_reload_successful`
	lastSuccessAt  = `ratedb_envoy_config_last_reload_success_timestamp_seconds`
)

// TestConfigReloadMetrics: /metrics counts the Envoy config's reloads
// (polled or on SIGHUP) by result, says whether the last load succeeded,
// and when a load last did (the one at start included).
func TestConfigReloadMetrics(t *testing.T) {
	unix := func(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
	const slack = 1e-3 // the float's rounding
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	writeFile(t, file, edgeYAML(10))
	before := time.Now()
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--envoy-config-poll", "10ms")
	m := scrape(t, p)
	assert.Equal(t, map[string]float64{reloadsOK: 0, reloadsFailed: 0, lastSuccessful: 1},
		map[string]float64{reloadsOK: m[reloadsOK], reloadsFailed: m[reloadsFailed], lastSuccessful: m[lastSuccessful]})
	started, ok := m[lastSuccessAt]
	require.True(t, ok, "%s is served", lastSuccessAt)
	assert.GreaterOrEqual(t, started, unix(before)-slack, "the load at start")
	assert.LessOrEqual(t, started, unix(time.Now())+slack)

	writeFile(t, file, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 9}\n")
	eventually(t, "the failed reload to be counted", func() bool { return scrape(t, p)[reloadsFailed] == 1 })
	m = scrape(t, p)
	assert.Equal(t, 0.0, m[reloadsOK])
	assert.Equal(t, 0.0, m[lastSuccessful], "the previous config stays")
	assert.Equal(t, started, m[lastSuccessAt], "no success since start")

	fixed := time.Now()
	writeFile(t, file, edgeYAML(20))
	eventually(t, "the reload to be counted", func() bool { return scrape(t, p)[reloadsOK] == 1 })
	require.EqualValues(t, 20, limitOf(t, p.client(t, nil)))
	m = scrape(t, p)
	assert.Equal(t, 1.0, m[reloadsFailed])
	assert.Equal(t, 1.0, m[lastSuccessful])
	assert.GreaterOrEqual(t, m[lastSuccessAt], unix(fixed)-slack)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	eventually(t, "the SIGHUP reload to be counted", func() bool { return scrape(t, p)[reloadsOK] == 2 })
}

// Without --envoy-config there is nothing to reload and no such metric.
func TestConfigReloadMetricsNeedAConfig(t *testing.T) {
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"))
	m := scrape(t, p)
	_, ok := m["ratedb_check_duration_seconds_count"]
	require.True(t, ok, "the scrape worked")
	for _, name := range []string{reloadsOK, reloadsFailed, lastSuccessful, lastSuccessAt} {
		_, ok := m[name]
		assert.False(t, ok, "%s is not served", name)
	}
}
