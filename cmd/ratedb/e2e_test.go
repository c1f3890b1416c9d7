package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Windows in these tests are per_key with a long scale, so that no window
// boundary falls inside a test.
var longWindow = []string{"--default-algorithm", "per_key", "--default-window", "1h"}

func TestCheckContract(t *testing.T) {
	t.Parallel()
	s := start(t, filepath.Join(t.TempDir(), "s.db"), "--default-limit", "100", "--default-window", "60s")
	code, h, body := s.do("POST", "/v1/check", clientKey, `{"client_id":"user123","route":"/api/v1/order","cost":1}`)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	re := regexp.MustCompile(`^\{"meta":\{"message":"success","code":200,"status":"ok"\},"data":\{"status":"Allow","limit":100,"remain":99,"reset_in_second":(\d+)\}\}$`)
	m := re.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	reset, _ := strconv.Atoi(m[1])
	// 0 when the window ended between the decision and the answer.
	assert.True(t, reset >= 0 && reset <= 60, "reset_in_second %d", reset)
	assert.Empty(t, h.Get("Retry-After"))
}

func TestConcurrentClientsExact(t *testing.T) {
	t.Parallel()
	s := start(t, filepath.Join(t.TempDir(), "s.db"), append(longWindow, "--default-limit", "50")...)
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				d := s.check("user123", "/api/v1/order")
				if d.Status == "Allow" {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(50), allowed.Load())
	assert.Equal(t, int64(110), denied.Load())
	// Another route is another count.
	assert.Equal(t, int64(49), s.check("user123", "/api/v1/other").Remain)
}

func TestDenyStatusAndRetryAfter(t *testing.T) {
	t.Parallel()
	s := start(t, filepath.Join(t.TempDir(), "s.db"), "--default-limit", "1", "--deny-status", "429", "--default-window", "1h", "--default-algorithm", "per_key")
	assert.Equal(t, "Allow", s.check("u", "/r").Status)
	code, h, body := s.do("POST", "/v1/check", clientKey, `{"client_id":"u","route":"/r"}`)
	require.Equal(t, http.StatusTooManyRequests, code, body)
	assert.Contains(t, body, `{"meta":{"message":"success","code":429,"status":"ok"},"data":{"status":"Deny","limit":1,"remain":0,"reset_in_second":`)
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	require.NoError(t, err)
	assert.True(t, ra > 3500 && ra <= 3600, "Retry-After %d", ra)
}

func TestSIGTERMRestartKeepsCounts(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	args := append(longWindow, "--default-limit", "10", "--snapshot-period", "1h")
	s := start(t, db, args...)
	for range 6 {
		require.Equal(t, "Allow", s.check("c", "/r").Status)
	}
	assert.Equal(t, 0, s.stop(syscall.SIGTERM), s.stderr.String())
	assert.Contains(t, s.stderr.String(), "final snapshot written")

	s = start(t, db, args...)
	d := s.check("c", "/r")
	assert.Equal(t, "Allow", d.Status)
	assert.Equal(t, int64(3), d.Remain, "the 6 hits before the restart count")
	for range 3 {
		s.check("c", "/r")
	}
	assert.Equal(t, "Deny", s.check("c", "/r").Status)
}

func TestSIGKILLLosesAtMostOneSnapshot(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	// Snapshots only when asked: /readyz writes one.
	args := append(longWindow, "--default-limit", "100", "--snapshot-period", "1h")
	s := start(t, db, args...)
	for range 5 {
		s.check("c", "/r")
	}
	code, _, body := s.do("GET", "/readyz", "", "")
	require.Equal(t, http.StatusOK, code, body)
	for range 3 {
		s.check("c", "/r")
	}
	s.stop(syscall.SIGKILL)

	s = start(t, db, args...)
	d := s.check("c", "/r")
	// 5 hits were snapshotted; the 3 after may be lost; this one counts.
	assert.GreaterOrEqual(t, d.Remain, int64(100-9))
	assert.LessOrEqual(t, d.Remain, int64(100-6), "the snapshotted hits survive a SIGKILL")
}

func TestRulesAtRuntimeSurviveRestart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	args := append(longWindow, "--default-limit", "100")
	s := start(t, db, args...)

	put := func(name, body string) (int, string) {
		code, _, b := s.do("PUT", "/v1/rules/"+name, adminKey, body)
		return code, b
	}
	code, body := put("vip", `{"client_id":"user123","route":"/api/v1/order","algorithm":"per_key","limit":2,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	assert.Equal(t, int64(2), s.check("user123", "/api/v1/order").Limit, "applies to the next check")
	assert.Equal(t, "Allow", s.check("user123", "/api/v1/order").Status)
	assert.Equal(t, "Deny", s.check("user123", "/api/v1/order").Status)

	// A raised limit keeps the count: 2 used of 3.
	code, body = put("vip", `{"client_id":"user123","route":"/api/v1/order","algorithm":"per_key","limit":3,"window":"1h"}`)
	require.Equal(t, http.StatusOK, code, body)
	d := s.check("user123", "/api/v1/order")
	assert.Equal(t, "Allow", d.Status)
	assert.Equal(t, int64(0), d.Remain)
	assert.Equal(t, "Deny", s.check("user123", "/api/v1/order").Status)

	// A new window starts new counts.
	code, body = put("vip", `{"client_id":"user123","route":"/api/v1/order","algorithm":"per_key","limit":3,"window":"2h"}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, int64(2), s.check("user123", "/api/v1/order").Remain)

	// Layered rules answer their tiers.
	code, body = put("tiered", `{"client_id":"t-*","route":"*","algorithm":"per_key","tiers":[{"limit":1,"window":"1m"},{"limit":3,"window":"1h"}]}`)
	require.Equal(t, http.StatusCreated, code, body)
	d = s.check("t-1", "/x")
	require.Len(t, d.Tiers, 2)
	assert.Equal(t, "1m0s", d.Tiers[0].Window)
	assert.Equal(t, int64(2), d.Tiers[1].Remain)
	d = s.check("t-1", "/x")
	assert.Equal(t, "Deny", d.Status)
	assert.Equal(t, int64(1), d.Limit, "the minute denies")

	code, _, body = s.do("GET", "/v1/rules", adminKey, "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"name":"tiered"`)
	assert.Contains(t, body, `"name":"vip"`)
	require.Equal(t, 0, s.stop(syscall.SIGTERM))

	s = start(t, db, args...)
	code, _, body = s.do("GET", "/v1/rules/vip", adminKey, "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"window":"2h0m0s"`)
	assert.Equal(t, int64(1), s.check("user123", "/api/v1/order").Remain, "rule and count survive the restart")
	code, _, _ = s.do("DELETE", "/v1/rules/vip", adminKey, "")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, int64(100), s.check("user123", "/api/v1/order").Limit, "the default applies again")
	code, _, _ = s.do("DELETE", "/v1/rules/vip", adminKey, "")
	assert.Equal(t, http.StatusNotFound, code)
	require.Equal(t, 0, s.stop(syscall.SIGTERM))

	s = start(t, db, args...)
	code, _, _ = s.do("GET", "/v1/rules/vip", adminKey, "")
	assert.Equal(t, http.StatusNotFound, code, "the deletion survives the restart")
}

// A service killed while it saved the rules (after writing its temporary
// file, before renaming it over PATH.rules.json: see
// TestKilledSaveKeepsTheRulesAndIsCleanedUp in internal/rules, which kills
// one there) leaves the rules file whole and PATH.rules.json.tmp<digits>
// beside it, as large as the rules. The next start removes it, and only it
// (an operator's file of a similar name stays), and serves the rules the
// file holds. Before, nothing ever removed it.
func TestStartRemovesWhatAKilledSaveOfTheRulesLeft(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	args := append(longWindow, "--default-limit", "100")
	s := start(t, db, args...)
	code, _, body := s.do("PUT", "/v1/rules/vip", adminKey, `{"client_id":"user123","route":"*","limit":2,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	require.Equal(t, 0, s.stop(syscall.SIGTERM))

	stored, err := os.ReadFile(db + ".rules.json")
	require.NoError(t, err)
	left := db + ".rules.json.tmp2718281828"
	require.NoError(t, os.WriteFile(left, stored[:len(stored)/2], 0o600)) // as a kill mid-write leaves it
	mine := db + ".rules.json.tmp-before-upgrade"
	require.NoError(t, os.WriteFile(mine, stored, 0o600))

	s = start(t, db, args...)
	_, err = os.Stat(left)
	assert.ErrorIs(t, err, os.ErrNotExist, "the start removed the save's leftover")
	_, err = os.Stat(mine)
	assert.NoError(t, err, "an operator's file is kept")
	assert.Contains(t, s.stderr.String(), "removed files left by a save of the rules that did not finish")
	assert.Equal(t, int64(2), s.check("user123", "/x").Limit, "the stored rule is served")
	code, _, body = s.do("PUT", "/v1/rules/other", adminKey, `{"client_id":"other","route":"*","limit":5,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)
	require.Equal(t, 0, s.stop(syscall.SIGTERM))
}

func TestWildcardPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(rulesFile, []byte(`
rules:
  - {name: exact, client_id: user123, route: /api/v1/order, limit: 1, window: 1h}
  - {name: premium, client_id: "premium-*", route: "*", limit: 2, window: 1h}
  - {name: premium-bulk, client_id: "premium-*", route: "/api/v1/bulk/*", limit: 3, window: 1h}
  - {name: bulk, client_id: "*", route: "/api/v1/bulk/*", limit: 4, window: 1h}
`), 0o600))
	s := start(t, filepath.Join(dir, "s.db"), "--rules", rulesFile)
	cases := []struct {
		client, route, rule string
		limit               int64
	}{
		{"user123", "/api/v1/order", "exact", 1},
		{"premium-7", "/api/v1/bulk/upload", "premium-bulk", 3},
		{"premium-7", "/api/v1/order", "premium", 2},
		{"free-1", "/api/v1/bulk/upload", "bulk", 4},
		{"free-1", "/api/v1/order", "default", 100},
	}
	for _, c := range cases {
		code, _, body := s.do("GET", fmt.Sprintf("/v1/rules/match?client_id=%s&route=%s", c.client, c.route), adminKey, "")
		require.Equal(t, http.StatusOK, code, body)
		var a answer
		require.NoError(t, json.Unmarshal([]byte(body), &a))
		var m struct {
			Rule   struct{ Name string } `json:"rule"`
			Reason string                `json:"reason"`
		}
		require.NoError(t, json.Unmarshal(a.Data, &m))
		assert.Equal(t, c.rule, m.Rule.Name, "%s %s", c.client, c.route)
		assert.NotEmpty(t, m.Reason)
		assert.Equal(t, c.limit, s.check(c.client, c.route).Limit, "%s %s", c.client, c.route)
	}
}

func TestErrorsCreateNoState(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	s := start(t, db)
	big := `{"client_id":"` + strings.Repeat("x", 70<<10) + `","route":"/r"}`
	cases := []struct {
		name, method, path, key, body string
		code                          int
	}{
		{"malformed", "POST", "/v1/check", clientKey, `{"client_id":`, 400},
		{"unknown field", "POST", "/v1/check", clientKey, `{"client_id":"u","route":"/r","x":1}`, 400},
		{"missing client", "POST", "/v1/check", clientKey, `{"route":"/r"}`, 400},
		{"empty route", "POST", "/v1/check", clientKey, `{"client_id":"u","route":""}`, 400},
		{"zero cost", "POST", "/v1/check", clientKey, `{"client_id":"u","route":"/r","cost":0}`, 400},
		{"long id", "POST", "/v1/check", clientKey, `{"client_id":"` + strings.Repeat("x", 513) + `","route":"/r"}`, 400},
		{"no key", "POST", "/v1/check", "", `{"client_id":"u","route":"/r"}`, 401},
		{"unknown key", "POST", "/v1/check", "nope", `{"client_id":"u","route":"/r"}`, 401},
		{"client key on admin API", "GET", "/v1/rules", clientKey, "", 403},
		{"client key puts a rule", "PUT", "/v1/rules/x", clientKey, `{"client_id":"*","route":"*","limit":1,"window":"1s"}`, 403},
		{"no key on admin API", "GET", "/v1/rules/match?client_id=a&route=b", "", "", 401},
		{"GET check", "GET", "/v1/check", clientKey, "", 405},
		{"POST rules", "POST", "/v1/rules", adminKey, "", 405},
		{"too large", "POST", "/v1/check", clientKey, big, 413},
		{"invalid rule", "PUT", "/v1/rules/bad", adminKey, `{"client_id":"","route":"*","limit":-1,"window":"soon"}`, 400},
		{"reserved rule name", "PUT", "/v1/rules/default", adminKey, `{"client_id":"*","route":"*","limit":1,"window":"1s"}`, 400},
	}
	for _, c := range cases {
		code, _, body := s.do(c.method, c.path, c.key, c.body)
		assert.Equal(t, c.code, code, "%s: %s", c.name, body)
		var a answer
		if assert.NoError(t, json.Unmarshal([]byte(body), &a), "%s: %s", c.name, body) {
			assert.Equal(t, "error", a.Meta.Status, c.name)
			assert.Equal(t, c.code, a.Meta.Code, c.name)
			assert.NotEmpty(t, a.Meta.Message, c.name)
		}
	}
	_, _, body := s.do("PUT", "/v1/rules/bad", adminKey, `{"client_id":"","route":"*","limit":-1,"window":"soon"}`)
	assert.Contains(t, body, "client_id is empty")
	assert.Contains(t, body, "limit -1")
	assert.Contains(t, body, `window \"soon\"`, "every problem at once")
	require.Equal(t, 0, s.stop(syscall.SIGTERM))

	out, stderr, code := runTool(t, "inspect", db)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "summary: 0 records", "no request above created state")
}

func TestMetricsAndHealth(t *testing.T) {
	t.Parallel()
	s := start(t, filepath.Join(t.TempDir(), "s.db"), append(longWindow, "--default-limit", "3")...)
	for range 5 {
		s.check("m", "/r")
	}
	code, _, _ := s.do("GET", "/healthz", "", "")
	assert.Equal(t, http.StatusOK, code)
	code, _, _ = s.do("GET", "/readyz", "", "")
	assert.Equal(t, http.StatusOK, code)
	code, _, body := s.do("GET", "/metrics", "", "")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		`ratedb_checks_total{api="http",decision="allow",rule="default"} 3`,
		`ratedb_checks_total{api="http",decision="deny",rule="default"} 2`,
		`ratedb_check_duration_seconds_count 5`,
		`ratedb_window_resets_total{api="http",rule="default"} 1`,
		`ratedb_boundary_spikes_total{api="http",rule="default"} 0`,
		`ratedb_store_errors_total{api="http",rule="default"} 0`,
		`ratedb_windows_in_memory 1`,
		`ratedb_windows_on_disk 1`,
		`ratedb_snapshots_total`,
		`ratedb_snapshot_duration_seconds`,
		`ratedb_snapshot_failures_total 0`,
		`ratedb_spills_total 0`,
		`ratedb_reloads_total 0`,
		`ratedb_memory_in_use_bytes`,
		`go_goroutines`,
		`process_cpu_seconds_total`,
	} {
		assert.Contains(t, body, want)
	}
	assert.NotContains(t, body, `client_id`)
	assert.NotContains(t, body, `route="`)
}

func TestVersionAndUsage(t *testing.T) {
	t.Parallel()
	out, _, code := runTool(t, "version")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "ratedb "), out)
	_, stderr, code := runTool(t, "serve", "-h")
	assert.Equal(t, 0, code)
	for _, f := range []string{"-http", "-db", "-redis", "-api-keys-file", "-admin-keys-file", "-default-limit", "-default-window", "-default-algorithm", "-rules", "-deny-status", "-fail-open", "-log-format", "-log-keys"} {
		assert.Contains(t, stderr, f)
	}
	_, _, code = runTool(t, "frobnicate")
	assert.Equal(t, 2, code)
	_, stderr, code = runTool(t, "serve", "--deny-status", "500", "--log-format", "xml")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--deny-status 500")
	assert.Contains(t, stderr, "--log-format")
}
