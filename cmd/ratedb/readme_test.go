package main_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// flagEntries parses flag.PrintDefaults output: each entry is its
// "  -name ..." line with the indented description lines after it.
func flagEntries(text string) map[string]string {
	out := map[string]string{}
	name := ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			name = strings.Fields(line)[0][1:]
			out[name] = line
		case name != "" && strings.HasPrefix(line, "    \t"):
			out[name] += "\n" + line
		default:
			name = ""
		}
	}
	return out
}

// TestReadmeFlagsMatchHelp: the README's flag block is what `ratedb serve
// -h` prints, word for word, and every flag it prints is in the README
// (the gRPC and Envoy flags in their own table).
func TestReadmeFlagsMatchHelp(t *testing.T) {
	t.Parallel()
	_, help, _ := runTool(t, "serve", "-h")
	flags := flagEntries(help)
	require.NotEmpty(t, flags)

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(readme)
	i := strings.Index(text, "### Flags (`ratedb serve -h`")
	require.GreaterOrEqual(t, i, 0, "the README's flags section")
	block := regexp.MustCompile("(?s)```\n(.*?)```").FindStringSubmatch(text[i:])
	require.NotNil(t, block)
	documented := flagEntries(block[1])
	require.NotEmpty(t, documented)
	for name, entry := range documented {
		assert.Equal(t, flags[name], entry, "README entry of -%s differs from serve -h", name)
	}
	for name := range flags {
		if _, ok := documented[name]; !ok {
			assert.Contains(t, text, "`--"+name, "-%s is in neither the README's flag block nor a table", name)
		}
	}
}

// metricRow is a row of the README's metrics table: the families it names
// (a name ending in "*" stands for every family with that prefix), the
// labels it gives them, its type ("" for none) and the values its meaning
// gives a label ("`decision` = `allow` or `deny`").
type metricRow struct {
	names  []string
	labels []string
	kind   string
	values map[string][]string
}

// readmeMetrics returns the rows of the README's metrics table, in order.
func readmeMetrics(t *testing.T) []metricRow {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(readme)
	i := strings.Index(text, "### Metrics and health")
	require.GreaterOrEqual(t, i, 0, "the README's metrics section")
	const header = "| metric | type | meaning |\n|---|---|---|\n"
	j := strings.Index(text[i:], header)
	require.GreaterOrEqual(t, j, 0, "the metrics table")
	nameRE := regexp.MustCompile("`([a-z_*]+)(?:\\{([a-z_,]*)\\})?`")
	valuesRE := regexp.MustCompile("`([a-z_]+)` = `([^`]+)` or `([^`]+)`")
	var rows []metricRow
	for _, line := range strings.Split(text[i+j+len(header):], "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		require.GreaterOrEqual(t, len(cells), 4, line)
		var row metricRow
		for _, m := range nameRE.FindAllStringSubmatch(cells[1], -1) {
			row.names = append(row.names, m[1])
			if m[2] != "" {
				row.labels = strings.Split(m[2], ",")
			}
		}
		require.NotEmpty(t, row.names, line)
		row.kind = strings.TrimSpace(cells[2])
		for _, m := range valuesRE.FindAllStringSubmatch(strings.Join(cells[3:], "|"), -1) {
			if row.values == nil {
				row.values = map[string][]string{}
			}
			row.values[m[1]] = []string{m[2], m[3]}
		}
		rows = append(rows, row)
	}
	require.NotEmpty(t, rows)
	return rows
}

// exportedFamily is a metric family as /metrics serves it: its type and
// the values of each label its samples carry.
type exportedFamily struct {
	kind   string
	labels map[string]map[string]bool
}

// scrapeFamilies returns the families s serves on /metrics, by name, with
// their type and the labels their samples carry, with their values (a
// histogram's "le" left out).
func scrapeFamilies(t *testing.T, s *service) map[string]*exportedFamily {
	t.Helper()
	code, _, body := s.do("GET", "/metrics", "", "")
	require.Equal(t, http.StatusOK, code)
	families := map[string]*exportedFamily{}
	sampleRE := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	labelRE := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"`)
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = &exportedFamily{kind: f[3], labels: map[string]map[string]bool{}}
			continue
		}
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[1]
		if families[name] == nil {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && families[base] != nil {
					name = base
				}
			}
		}
		fam := families[name]
		require.NotNil(t, fam, "sample of a family without a TYPE line: %s", line)
		for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
			if l[1] != "le" && l[1] != "quantile" {
				if fam.labels[l[1]] == nil {
					fam.labels[l[1]] = map[string]bool{}
				}
				fam.labels[l[1]][l[2]] = true
			}
		}
	}
	require.NotEmpty(t, families)
	return families
}

// The metrics table rows from the first to the last of these are the DB's
// own (ratedbprom's), which `ratedb serve --redis` does not export, as the
// README says above the table.
const (
	firstDBMetric = "ratedb_windows_in_memory"
	lastDBMetric  = "ratedb_hits_denied_total"
)

// TestReadmeMetricsMatchExported: the README's metrics table names every
// family `ratedb serve` exports (with --grpc and --envoy-config, so that
// every family is registered, and after one check, which creates the
// per-rule series), with its type, labels and the values it gives a label
// ("`decision` = `allow` or `deny`"), and names nothing it does
// not export. With --redis (against a real redis-server), it exports
// exactly the rows outside the DB's own range; no family exists only with
// --redis.
func TestReadmeMetricsMatchExported(t *testing.T) {
	t.Parallel()
	rows := readmeMetrics(t)
	first, last := -1, -1
	for i, row := range rows {
		if slices.Contains(row.names, firstDBMetric) {
			first = i
		}
		if slices.Contains(row.names, lastDBMetric) {
			last = i
		}
	}
	require.True(t, first >= 0 && last >= first, "the DB's metrics are rows %s to %s of the table", firstDBMetric, lastDBMetric)

	envoyConfig := filepath.Join(t.TempDir(), "edge.yaml")
	require.NoError(t, os.WriteFile(envoyConfig,
		[]byte("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 10}\n"), 0o600))
	addr, _ := proctest.StartRedis(t)
	for _, tc := range []struct {
		name  string
		args  []string
		dbRow bool // the DB's rows are exported
	}{
		{"file", nil, true},
		{"redis", []string{"--redis", "redis://" + addr + "/0", "--redis-timeout", "5s"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--grpc", "127.0.0.1:0", "--envoy-config", envoyConfig}, tc.args...)
			s := start(t, filepath.Join(t.TempDir(), "s.db"), args...)
			s.check("m", "/r")
			exported := scrapeFamilies(t, s)

			documented := map[string]bool{}
			var prefixes []string
			for i, row := range rows {
				want := tc.dbRow || i < first || i > last
				for _, name := range row.names {
					if prefix, ok := strings.CutSuffix(name, "*"); ok {
						prefixes = append(prefixes, prefix)
						found := false
						for fam := range exported {
							found = found || strings.HasPrefix(fam, prefix)
						}
						assert.True(t, found, "the README lists %s, which matches no exported family", name)
						continue
					}
					documented[name] = true
					fam, ok := exported[name]
					if !want {
						assert.False(t, ok, "%s is exported, but the README says it is the DB's, not exported with --redis", name)
						continue
					}
					if !assert.True(t, ok, "the README lists %s, which is not exported", name) {
						continue
					}
					assert.Equal(t, row.kind, fam.kind, "the README's type of %s", name)
					assert.ElementsMatch(t, row.labels, slices.Collect(maps.Keys(fam.labels)), "the README's labels of %s", name)
					for label, values := range row.values {
						assert.ElementsMatch(t, values, slices.Collect(maps.Keys(fam.labels[label])), "the README's values of %s's label %s", name, label)
					}
				}
			}
			for name := range exported {
				if !documented[name] && !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
					t.Errorf("%s is exported but not in the README's metrics table", name)
				}
			}
		})
	}
}

// TestReadmeFlagNamesExist: every flag the README names in backquotes (the
// tables of the Envoy section included) is one `ratedb serve -h` or `ratedb
// inspect -h` prints, and a family such as `--envoy-config-*` names at
// least one; TestReadmeFlagsMatchHelp checks the other direction for serve.
func TestReadmeFlagNamesExist(t *testing.T) {
	t.Parallel()
	_, help, _ := runTool(t, "serve", "-h")
	flags := flagEntries(help)
	require.NotEmpty(t, flags)
	_, help, _ = runTool(t, "inspect", "-h")
	inspect := flagEntries(help)
	require.Contains(t, inspect, "json")
	maps.Copy(flags, inspect)
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	named := regexp.MustCompile("`--([a-z][a-z0-9-]*\\*?)").FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, named)
	for _, m := range named {
		if prefix, ok := strings.CutSuffix(m[1], "*"); ok {
			found := false
			for name := range flags {
				found = found || strings.HasPrefix(name, prefix)
			}
			assert.True(t, found, "the README names --%s, which matches no flag of serve -h or inspect -h", m[1])
			continue
		}
		assert.Contains(t, flags, m[1], "the README names --%s, which neither serve -h nor inspect -h prints", m[1])
	}
}

// readmeSection returns the README's text from the heading to the next
// heading of the same or a higher level (lines in code blocks, such as a
// YAML comment, are no headings).
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	level := strings.IndexByte(heading, ' ')
	var out []string
	in, fenced := false, false
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "#") {
			hashes := len(line) - len(strings.TrimLeft(line, "#"))
			switch {
			case line == heading:
				in = true
				continue
			case in && hashes <= level && strings.HasPrefix(line[hashes:], " "):
				return strings.Join(out, "\n")
			}
		}
		if in {
			out = append(out, line)
		}
	}
	require.True(t, in, "the README's section %q", heading)
	return strings.Join(out, "\n")
}

// readmeBlocks returns the contents of the section's code blocks of lang.
func readmeBlocks(t *testing.T, section, lang string) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	require.NotEmpty(t, out, "a %s block in the README section", lang)
	return out
}

// TestReadmeServiceExamplesWork runs the README's examples of the service
// as an operator would, against the built binary: the rules file of
// "Rules" imported with --rules, its two rule bodies stored through the
// admin API, the check request of "The check API" answered byte for byte
// as shown, and the inspect command listing that client's window.
func TestReadmeServiceExamplesWork(t *testing.T) {
	t.Parallel()
	rulesText := readmeSection(t, "### Rules")
	rulesFile := filepath.Join(t.TempDir(), "rules.yaml")
	yamlBlocks := readmeBlocks(t, rulesText, "yaml")
	require.Len(t, yamlBlocks, 1)
	require.NoError(t, os.WriteFile(rulesFile, []byte(yamlBlocks[0]), 0o600))
	db := filepath.Join(t.TempDir(), "ratedb.db")
	s := start(t, db, "--rules", rulesFile)

	// The file's rules, as its comments describe them.
	for name, want := range map[string]string{
		"api-bulk":   `{"name":"api-bulk","client_id":"*","route":"api:bulk:*","algorithm":"fixed","limit":1000,"window":"1m0s"}`,
		"user-daily": `{"name":"user-daily","client_id":"*","route":"user:*","algorithm":"fixed","limit":10000,"window":"24h0m0s"}`,
		"premium":    `{"name":"premium","client_id":"premium-*","route":"*","algorithm":"fixed","tiers":[{"limit":10,"window":"1m0s"},{"limit":500,"window":"1h0m0s"}]}`,
	} {
		code, _, body := s.do("GET", "/v1/rules/"+name, adminKey, "")
		require.Equal(t, http.StatusOK, code, body)
		assert.JSONEq(t, `{"meta":{"message":"success","code":200,"status":"ok"},"data":{"rule":`+want+`}}`, body, name)
	}

	// The rule bodies: each one a valid PUT.
	jsonBlocks := readmeBlocks(t, rulesText, "json")
	require.Len(t, jsonBlocks, 1)
	bodies := strings.Split(strings.TrimSpace(jsonBlocks[0]), "\n")
	require.Len(t, bodies, 2)
	for i, body := range bodies {
		code, _, answer := s.do("PUT", fmt.Sprintf("/v1/rules/readme-%d", i), adminKey, body)
		assert.Equal(t, http.StatusCreated, code, "README rule %s: %s", body, answer)
	}

	// The check request and its answer.
	checkText := readmeSection(t, "### The check API")
	request := regexp.MustCompile("the body `(\\{[^`]*\\})`").FindStringSubmatch(checkText)
	require.NotNil(t, request, "the check API's example body")
	answers := readmeBlocks(t, checkText, "json")
	want := regexp.MustCompile(`"reset_in_second":\d+`).ReplaceAllLiteralString(
		regexp.QuoteMeta(strings.TrimSpace(answers[0])), `"reset_in_second":\d+`)
	code, _, body := s.do("POST", "/v1/check", clientKey, request[1])
	assert.Equal(t, http.StatusOK, code, body)
	assert.Regexp(t, "^"+want+"$", body, "the answer, byte for byte")

	// A check of cost 0 (a peek, which only Envoy's per-descriptor
	// hits_addend 0 asks for) is refused as the README says.
	refused := regexp.MustCompile("answers a `cost` of (\\d+) with (\\d+)").FindStringSubmatch(strings.Join(strings.Fields(checkText), " "))
	require.NotNil(t, refused, "the README's word on a check of cost 0")
	code, _, body = s.do("POST", "/v1/check", clientKey, `{"client_id":"user123","route":"/api/v1/order","cost":`+refused[1]+`}`)
	assert.Equal(t, refused[2], fmt.Sprint(code), body)

	// The inspect command that lists this client's windows.
	require.Equal(t, 0, s.stop(syscall.SIGTERM), s.stderr.String())
	inspect := regexp.MustCompile("`ratedb inspect --prefix '([^']*)' ratedb\\.db`").FindStringSubmatch(checkText)
	require.NotNil(t, inspect, "the inspect example")
	out, stderr, code := runTool(t, "inspect", "--prefix", inspect[1], db)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.True(t, strings.HasPrefix(lines[0], inspect[1]+"/api/v1/order\tfixed\tscale=1m0s\tcount=1\t"), out)
	assert.Contains(t, lines[1], "1 listed", out)
}

var grpcAddrRE = regexp.MustCompile(`msg="listening \(gRPC, Envoy rate limit service\)" addr=(\S+)`)

// TestReadmeEnvoyExampleWorks runs the example of "Use with Envoy" as a
// new user would, against the built binary: its config file written where
// its file name comment says, in the directory the serve command gives
// --envoy-config, one ShouldRateLimit call from go-control-plane's client
// answered as the README says, and the README's inspect commands for the
// Envoy domain listing that window once the service has stopped.
func TestReadmeEnvoyExampleWorks(t *testing.T) {
	t.Parallel()
	section := readmeSection(t, "## Use with Envoy")
	var config string
	for _, b := range readmeBlocks(t, section, "yaml") {
		if strings.HasPrefix(b, "# ratelimit-config/") {
			config = b
		}
	}
	require.NotEmpty(t, config, "the README's example config, a yaml block starting with its file name")
	name := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(config, "\n", 2)[0], "# "))
	serveCmd := regexp.MustCompile(`ratedb serve [^\n]*--envoy-config \./(\S+)/`).FindStringSubmatch(section)
	require.NotNil(t, serveCmd, "the README's serve command with --envoy-config")
	require.Equal(t, serveCmd[1], filepath.Dir(name), "the config file is in the directory the serve command loads")

	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(config), 0o600))
	db := filepath.Join(t.TempDir(), "ratedb.db")
	s := start(t, db, "--grpc", "127.0.0.1:0", "--envoy-config", filepath.Join(dir, serveCmd[1])+"/")
	m := grpcAddrRE.FindStringSubmatch(s.stderr.String())
	require.NotNil(t, m, "the gRPC address in the log:\n%s", s.stderr)
	conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })

	text := strings.Join(strings.Fields(section), " ")
	call := regexp.MustCompile("A `ShouldRateLimit` call for domain `([^`]+)` with the descriptor `([^`]+)` = `([^`]+)` then answers OK with `limit_remaining` (\\d+)").FindStringSubmatch(text)
	require.NotNil(t, call, "the README's example call")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain: call[1],
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: call[2], Value: call[3]}},
		}},
	})
	require.NoError(t, err)
	assert.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
	require.Len(t, resp.GetStatuses(), 1)
	assert.Equal(t, call[4], fmt.Sprint(resp.GetStatuses()[0].GetLimitRemaining()), "limit_remaining")
	assert.NotNil(t, resp.GetStatuses()[0].GetCurrentLimit(), "a limit applied")
	require.Equal(t, 0, s.stop(syscall.SIGTERM), s.stderr.String())

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	inspects := regexp.MustCompile("`ratedb inspect (--envoy-domain [^`]*) ratedb\\.db`").FindAllStringSubmatch(strings.Join(strings.Fields(string(readme)), " "), -1)
	require.NotEmpty(t, inspects, "the README's inspect commands for an Envoy domain")
	for _, cmd := range inspects {
		out, stderr, code := runTool(t, append(append([]string{"inspect"}, strings.Fields(cmd[1])...), db)...)
		require.Equal(t, 0, code, stderr)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 2, "ratedb inspect %s: one window and the summary:\n%s", cmd[1], out)
		assert.Contains(t, lines[0], "\tcount=1\t", out)
		assert.Contains(t, lines[1], "1 listed", out)
	}
}

// TestReadmeConfigErrorExamples: the messages the README quotes for the
// refused rules of a well-formed --envoy-config are what ratedb serve
// says, values quoted: a unit it does not know, and a domain declared in
// two files.
func TestReadmeConfigErrorExamples(t *testing.T) {
	t.Parallel()
	text := strings.Join(strings.Fields(readmeSection(t, "### Operations")), " ")
	unit := regexp.MustCompile("`(invalid rate limit unit \"([a-z]+)\")`").FindStringSubmatch(text)
	require.NotNil(t, unit, "the README's invalid unit example")
	domain := regexp.MustCompile("`(duplicate domain \"([a-z]+)\")`").FindStringSubmatch(text)
	require.NotNil(t, domain, "the README's duplicate domain example")

	dir := t.TempDir()
	badUnit := filepath.Join(dir, "unit.yaml")
	require.NoError(t, os.WriteFile(badUnit, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: "+unit[2]+", requests_per_unit: 1}\n"), 0o600))
	twice := filepath.Join(dir, "twice")
	require.NoError(t, os.MkdirAll(twice, 0o700))
	for _, name := range []string{"a.yaml", "b.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(twice, name), []byte("domain: "+domain[2]+"\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"), 0o600))
	}
	for config, want := range map[string]string{badUnit: unit[1], twice: domain[1]} {
		_, stderr, code := runTool(t, "serve", "--db", filepath.Join(t.TempDir(), "s.db"), "--http", "127.0.0.1:0",
			"--grpc", "127.0.0.1:0", "--envoy-config", config)
		assert.Equal(t, 1, code, stderr)
		assert.Contains(t, stderr, want)
	}
}

// TestReadmeOverrideSeries: a ShouldRateLimit call whose descriptor
// carries a per-request limit override is counted under the series the
// README names for overrides, not under the config entry's path.
func TestReadmeOverrideSeries(t *testing.T) {
	t.Parallel()
	text := strings.Join(strings.Fields(readmeSection(t, "### Metrics and health")), " ")
	m := regexp.MustCompile("every override counts under `\\{api=\"([^\"]+)\",rule=\"([^\"]+)\"\\}`").FindStringSubmatch(text)
	require.NotNil(t, m, "the README's series of limit overrides")

	config := filepath.Join(t.TempDir(), "edge.yaml")
	require.NoError(t, os.WriteFile(config,
		[]byte("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 10}\n"), 0o600))
	s := start(t, filepath.Join(t.TempDir(), "s.db"), "--grpc", "127.0.0.1:0", "--envoy-config", config)
	addr := grpcAddrRE.FindStringSubmatch(s.stderr.String())
	require.NotNil(t, addr, "the gRPC address in the log:\n%s", s.stderr)
	conn, err := grpc.NewClient(addr[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain: "edge",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "alice"}},
			Limit:   &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_MINUTE},
		}},
	})
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), 1)
	require.Equal(t, uint32(5), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), "the override applied")

	_, _, body := s.do("GET", "/metrics", "", "")
	assert.Contains(t, body, `ratedb_checks_total{api="`+m[1]+`",decision="allow",rule="`+m[2]+`"} 1`)
	assert.NotContains(t, body, `rule="edge.user"`, "the config entry's series counted nothing")
}
