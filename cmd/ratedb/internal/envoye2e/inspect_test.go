package envoye2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envoyKey is the counted key of a descriptor of domain with the given
// entries' keys and values, as the gRPC API writes it: "\x00envoy\x00",
// then the domain and each key and value, each after its length (one byte
// here: every part is shorter than 128 bytes).
func envoyKey(t *testing.T, domain string, pairs ...string) string {
	t.Helper()
	k := "\x00envoy\x00"
	for _, s := range append([]string{domain}, pairs...) {
		require.Less(t, len(s), 128)
		k += string([]byte{byte(len(s))}) + s
	}
	return k
}

// inspect runs `ratedb inspect` with args and returns its stdout, stderr
// and exit status.
func inspect(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := execCommand(ctx, append([]string{"inspect"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

// TestInspectSelectsEnvoyWindows counts descriptors of two domains, one
// named as the other's start ("api", "apix"), through the real binary's
// gRPC API, then lists them with inspect: --envoy-domain NAME lists the
// windows of that domain alone and --envoy-entry KEY=VALUE narrows them
// to the descriptors whose first entries those are, in order. The keys
// start with a NUL byte, which no command-line argument can hold, so
// --prefix could not select them at all. Text output still shows them
// quoted; bad combinations are usage errors (exit 2) that list nothing and
// do not echo the entry given.
func TestInspectSelectsEnvoyWindows(t *testing.T) {
	clearOfBoundary(time.Hour, 30*time.Second)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	require.NoError(t, os.Mkdir(cfg, 0o700))
	writeFile(t, filepath.Join(cfg, "api.yaml"), `domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: tenant
    descriptors:
      - key: plan
        rate_limit: {unit: hour, requests_per_unit: 100}
`)
	writeFile(t, filepath.Join(cfg, "apix.yaml"), `domain: apix
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
`)
	db := filepath.Join(dir, "state.db")
	p := startProc(t, db, "--envoy-config", cfg)
	c := p.client(t, nil)
	call(t, c, "api", 2, desc("user", "alice"))
	call(t, c, "api", 1, desc("user", "bob"))
	call(t, c, "api", 1, desc("tenant", "t1", "plan", "gold"))
	call(t, c, "apix", 3, desc("user", "alice"))
	p.stop(t)

	alice := envoyKey(t, "api", "user", "alice")
	bob := envoyKey(t, "api", "user", "bob")
	gold := envoyKey(t, "api", "tenant", "t1", "plan", "gold")
	xalice := envoyKey(t, "apix", "user", "alice")
	for _, tc := range []struct {
		name string
		args []string
		want map[string]int64 // key: count
	}{
		{"domain", []string{"--envoy-domain", "api"}, map[string]int64{alice: 2, bob: 1, gold: 1}},
		{"the other domain", []string{"--envoy-domain", "apix"}, map[string]int64{xalice: 3}},
		{"a domain's start", []string{"--envoy-domain", "ap"}, map[string]int64{}},
		{"one entry", []string{"--envoy-domain", "api", "--envoy-entry", "user=alice"}, map[string]int64{alice: 2}},
		{"an entry's key", []string{"--envoy-domain", "api", "--envoy-entry", "tenant=t1"}, map[string]int64{gold: 1}},
		{"two entries", []string{"--envoy-domain", "api", "--envoy-entry", "tenant=t1", "--envoy-entry", "plan=gold"}, map[string]int64{gold: 1}},
		{"a value's start", []string{"--envoy-domain", "api", "--envoy-entry", "user=al"}, map[string]int64{}},
		{"no filter", nil, map[string]int64{alice: 2, bob: 1, gold: 1, xalice: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := inspect(t, append(append([]string{"--json"}, tc.args...), db)...)
			require.Equal(t, 0, code, stderr)
			var got struct {
				Windows []struct {
					Key      string  `json:"key"`
					KeyBytes []byte  `json:"key_bytes"`
					Counts   []int64 `json:"counts"`
				} `json:"windows"`
				Summary struct{ Records, Listed int } `json:"summary"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &got), out)
			listed := map[string]int64{}
			for _, w := range got.Windows {
				require.Nil(t, w.KeyBytes, "%q is UTF-8", w.Key)
				require.Len(t, w.Counts, 1)
				listed[w.Key] = w.Counts[0]
			}
			assert.Equal(t, tc.want, listed)
			assert.Equal(t, 4, got.Summary.Records)
			assert.Equal(t, len(tc.want), got.Summary.Listed)
		})
	}

	out, stderr, code := inspect(t, "--envoy-domain", "apix", db)
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(out, strconv.Quote(xalice)+"\tfixed\tscale=1h0m0s\tcount=3\t"), out)
	assert.NotContains(t, out, "\x00", "a key printed raw")
	assert.Contains(t, out, "summary: 4 records, 1 listed (1 live, 0 expired), 0 unreadable")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"entry without domain", []string{"--envoy-entry", "user=alice"}, "--envoy-entry needs --envoy-domain"},
		{"prefix and domain", []string{"--prefix", "x", "--envoy-domain", "api"}, "--prefix and --envoy-domain exclude each other"},
		{"empty domain", []string{"--envoy-domain", ""}, "--envoy-domain needs a name"},
		{"entry without =", []string{"--envoy-domain", "api", "--envoy-entry", "user=alice", "--envoy-entry", "secretvalue"}, "--envoy-entry takes KEY=VALUE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := inspect(t, append(tc.args, db)...)
			assert.Equal(t, 2, code)
			assert.Contains(t, stderr, "ratedb inspect: "+tc.want)
			assert.Contains(t, stderr, "usage: ratedb inspect")
			assert.Empty(t, out)
			assert.NotContains(t, stderr, "secretvalue")
			assert.NotContains(t, stderr, "alice")
		})
	}
}
