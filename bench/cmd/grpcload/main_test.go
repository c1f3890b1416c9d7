package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

func TestMain(m *testing.M) {
	// startNoop re-executes this binary as the do-nothing server.
	if len(os.Args) == 3 && os.Args[1] == "-serve-noop" {
		serveNoop(os.Args[2])
		return
	}
	cmdtest.Main(main)
	os.Exit(m.Run())
}

// grpcload runs the command in a process of its own with args and TMPDIR
// set to tmpdir, and returns its stdout, stderr and exit status.
func grpcload(t *testing.T, tmpdir string, args ...string) (string, string, int) {
	t.Helper()
	return cmdtest.Run(t, cmdtest.Cmd{TempDir: tmpdir}, args...)
}

// TestBadFlagsExitBeforeStarting: each bad flag value exits 2 with a
// message naming it, before any server is started or directory made (the
// command's TMPDIR stays empty). -values 0 used to panic in a caller
// goroutine once the do-nothing server was serving, which ended the
// process with that server still running and the temporary directory left
// behind; -conns 0 and -rounds 0 panicked too; an unknown target was found
// only when its turn came, after the targets before it had been measured.
func TestBadFlagsExitBeforeStarting(t *testing.T) {
	tmp := t.TempDir()
	// The same flags with good values: a short run of the do-nothing
	// server exits 0 and leaves nothing behind.
	out, stderr, code := grpcload(t, tmp, "-targets", "noop", "-warmup", "0s", "-duration", "50ms", "-rounds", "1",
		"-workers", "2", "-conns", "1", "-values", "10", "-out", "")
	if code != 0 || !strings.Contains(out, "| noop |") {
		t.Fatalf("good flags: exit status %d, want 0 and a table; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no values", []string{"-values", "0"}, "-values must be at least 1"},
		{"no conns", []string{"-conns", "0"}, "-conns must be at least 1"},
		{"no workers", []string{"-workers", "0"}, "-workers must be at least 1"},
		{"no rounds", []string{"-rounds", "0"}, "-rounds must be at least 1"},
		{"no duration", []string{"-duration", "0s"}, "-duration must be above 0"},
		{"unknown target", []string{"-targets", "noop,ratedbb"}, `-targets: unknown target "ratedbb"`},
		{"empty target", []string{"-targets", "noop,"}, `-targets: unknown target ""`},
		{"target twice", []string{"-targets", "noop,noop"}, "-targets names noop twice"},
		{"argument", []string{"-rounds", "1", "2"}, `unexpected argument "2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-targets", "noop", "-warmup", "0s", "-duration", "10ms", "-out", ""}, tc.args...)
			out, stderr, code := grpcload(t, tmp, args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if !strings.Contains(stderr, "grpcload: "+tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "== round") || out != "" {
				t.Errorf("something was started or it panicked; stdout:\n%s\nstderr:\n%s", out, stderr)
			}
			ents, err := os.ReadDir(tmp)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				t.Errorf("left behind in TMPDIR: %s", e.Name())
			}
		})
	}
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
		r, err := runTarget(context.Background(), o, target, tmp, cfgDir, values)
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
	r, err := runTarget(context.Background(), o, "ratedb", tmp, lowDir, values)
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

// TestInterruptStopsTheServers runs the do-nothing target with a
// ten-minute warm-up and sends the command SIGINT once its server process
// serves and the warm-up has begun: it must stop, exit 130 with
// "interrupted" on stderr, and
// leave neither the server running nor its temporary directory in TMPDIR.
// Before, the signal ended the command at once and the server ran on, an
// orphan, with the directory left behind.
func TestInterruptStopsTheServers(t *testing.T) {
	tmp := t.TempDir()
	p := cmdtest.Start(t, cmdtest.Cmd{TempDir: tmp}, "-targets", "noop", "-warmup", "10m", "-duration", "10m",
		"-rounds", "1", "-workers", "1", "-conns", "1", "-values", "10", "-out", "")
	p.WaitStderr(t, "noop: serving on ", time.Minute)
	kids := cmdtest.WaitChildren(t, p.Pid(), 1, time.Minute, "-serve-noop")
	p.Signal(t, syscall.SIGINT)
	_, stderr, code := p.Wait(t, time.Minute)
	if code != 130 {
		t.Errorf("exit status %d, want 130; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "grpcload: interrupted by SIGINT") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr)
	}
	cmdtest.RequireGone(t, kids...)
	cmdtest.RequireEmpty(t, tmp)
}
