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
// each and checks that calls are made, answered without errors, counted by
// ratedb, and reported. (The envoyproxy/ratelimit target needs a download
// and a redis-server: it runs only in the full benchmark.)
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
		rs = append(rs, r)
	}
	report := format(o, rs, time.Now(), "0 0 0", "0 0 0")
	for _, want := range []string{"| noop |", "| ratedb |", "CPU ms per 1,000 calls"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
