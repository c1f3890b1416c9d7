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

// An HTTP rule and an Envoy config entry can have the same name: the rule
// "edge.user" and the domain "edge"'s key "user", whose path is
// "edge.user". The per-rule metrics carry an api label (http or envoy) that
// keeps them apart; with the rule label alone, the two limits' checks were
// summed into one series.
func TestHTTPRuleAndEnvoyEntryOfOneNameAreTwoSeries(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "edge.yaml"), edgeYAML(10))
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir)
	send := func(method, path, key, body string) int {
		req, err := http.NewRequest(method, "http://"+p.httpAddr+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusCreated, send(http.MethodPut, "/v1/rules/edge.user", adminKey,
		`{"client_id":"*","route":"/r","limit":10,"window":"1h"}`))
	c := p.client(t, nil)
	for range 2 {
		resp := call(t, c, "edge", 1, desc("user", "alice"))
		require.EqualValues(t, 10, resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), "the entry edge.user matched")
	}
	require.Equal(t, http.StatusOK, send(http.MethodPost, "/v1/check", "e2e-client-key-0123456789", `{"client_id":"alice","route":"/r"}`))

	m := scrape(t, p)
	var perRule []string // for the messages
	for series := range m {
		if strings.Contains(series, `rule="`) {
			perRule = append(perRule, series)
		}
	}
	for series, want := range map[string]float64{
		`ratedb_checks_total{api="envoy",decision="allow",rule="edge.user"}`: 2,
		`ratedb_checks_total{api="http",decision="allow",rule="edge.user"}`:  1,
		`ratedb_window_resets_total{api="envoy",rule="edge.user"}`:           1,
		`ratedb_window_resets_total{api="http",rule="edge.user"}`:            1,
		`ratedb_store_errors_total{api="envoy",rule="edge.user"}`:            0,
		`ratedb_store_errors_total{api="http",rule="edge.user"}`:             0,
	} {
		got, ok := m[series]
		if assert.True(t, ok, "%s is served (the per-rule series: %v)", series, perRule) {
			assert.Equal(t, want, got, series)
		}
	}
}
