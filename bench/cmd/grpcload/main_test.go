package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// startNoop re-executes this binary as the do-nothing server.
	if len(os.Args) == 3 && os.Args[1] == "-serve-noop" {
		serveNoop(os.Args[2])
		return
	}
	os.Exit(m.Run())
}

// TestSmoke runs the do-nothing server and ratedb serve --grpc for a moment
// each and checks that calls are made, answered without errors and allowed
// (the config's limit is one no run reaches, so an OVER_LIMIT or any answer
// other than OK means the target, or the request the load sends, is wrong),
// that ratedb matched the config's limit, and that the report shows them.
// Then it runs ratedb again with a limit of 1 per value, so that the
// over-limit count is known to see OVER_LIMIT answers (without that, the
// check that none came could pass because none were counted). (The
// envoyproxy/ratelimit target needs a download and a redis-server: it runs
// only in the full benchmark.)
func TestSmoke(t *testing.T) {
	tmp := t.TempDir()
	cfgDir := filepath.Join(tmp, "config")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "bench.yaml"), []byte(configYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	o := options{workers: 4, conns: 2, values: 100, warmup: 100 * time.Millisecond, duration: 300 * time.Millisecond, rounds: 1}
	values := []string{"a", "b", "c"}
	var rs []result
	for _, target := range []string{"noop", "ratedb"} {
		r, err := runTarget(o, target, tmp, cfgDir, values)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if r.calls == 0 || r.errors != 0 || r.p99 <= 0 {
			t.Fatalf("%s: %+v", target, r)
		}
		if r.overs != 0 {
			t.Fatalf("%s: %d of %d calls under the limit were not answered OK", target, r.overs, r.calls)
		}
		rs = append(rs, r)
	}
	// One hit per value per hour: of the calls, at most len(values) are
	// allowed (fewer, as the warm-up takes them; twice that if the run
	// crosses the end of an hour), every other one is over.
	lowDir := filepath.Join(tmp, "config-low")
	if err := os.MkdirAll(lowDir, 0o700); err != nil {
		t.Fatal(err)
	}
	low := strings.Replace(configYAML, "requests_per_unit: 1000000000", "requests_per_unit: 1", 1)
	if low == configYAML {
		t.Fatal("configYAML has no requests_per_unit: 1000000000 to lower")
	}
	if err := os.WriteFile(filepath.Join(lowDir, "bench.yaml"), []byte(low), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := runTarget(o, "ratedb", tmp, lowDir, values)
	if err != nil {
		t.Fatalf("ratedb, limit 1: %v", err)
	}
	if r.overs == 0 || r.calls-r.overs > int64(2*len(values)) {
		t.Fatalf("ratedb, limit 1 per value over %d values: %d of %d calls over the limit, want all but at most %d", len(values), r.overs, r.calls, 2*len(values))
	}
	report := format(o, rs, time.Now(), "0 0 0", "0 0 0")
	for _, want := range []string{"| noop |", "| ratedb |", "CPU ms per 1,000 calls"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
