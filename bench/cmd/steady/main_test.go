package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

func TestMain(m *testing.M) {
	cmdtest.Main(main)
	os.Exit(m.Run())
}

// steady runs the command in a process of its own with args and the
// environment variable tmpdir as TMPDIR, and returns its stdout, stderr
// and exit status.
func steady(t *testing.T, tmpdir string, args ...string) (string, string, int) {
	t.Helper()
	return cmdtest.Run(t, cmdtest.Cmd{TempDir: tmpdir}, args...)
}

// TestFailedMeasurementExitsNonZero makes every measurement fail (TMPDIR
// names a directory that does not exist, so the limiter under test cannot
// be built): the command must exit 1 and say so on stderr, where it used
// to print its table and exit 0, so that a script running it took the
// failed rows for results. The same run with a TMPDIR that exists
// succeeds, so it is the failure that the status reports.
func TestFailedMeasurementExitsNonZero(t *testing.T) {
	args := []string{"-keys", "100", "-warmup", "0s", "-dur", "1ms", "-limiters", "MutexMap", "-patterns", "roundrobin"}
	out, stderr, code := steady(t, t.TempDir(), args...)
	if code != 0 {
		t.Fatalf("with a TMPDIR: exit status %d, want 0; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(out, "| roundrobin | MutexMap |") || strings.Contains(out, "failed") {
		t.Fatalf("with a TMPDIR: the table lacks a clean MutexMap row:\n%s", out)
	}

	out, stderr, code = steady(t, filepath.Join(t.TempDir(), "missing"), args...)
	if code != 1 {
		t.Fatalf("with a missing TMPDIR: exit status %d, want 1; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	for _, want := range []string{"MutexMap/roundrobin: measurement failed:", "1 of 1 measurements failed"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if !strings.Contains(out, "(failed: see log)") {
		t.Errorf("the table does not mark the failed row:\n%s", out)
	}
}

// TestBadFlagsExitBeforeMeasuring: each bad flag value exits 2 with a
// message naming it, before any limiter is built (TMPDIR is missing, so a
// measurement would fail with another message). An unknown pattern used
// to be found only after the keys were filled, and then exit 0; -keys 0
// and a limiter named twice used to panic.
func TestBadFlagsExitBeforeMeasuring(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown pattern", []string{"-patterns", "roundrobin,zipff"}, `-patterns: unknown pattern "zipff"`},
		{"unknown limiter", []string{"-limiters", "MutexMap,Nope"}, `-limiters: bench: unknown limiter "Nope"`},
		{"empty limiter", []string{"-limiters", "MutexMap,"}, `-limiters: bench: unknown limiter ""`},
		{"limiter twice", []string{"-limiters", "MutexMap,GoLimiter,MutexMap"}, "-limiters names MutexMap twice"},
		{"no keys", []string{"-keys", "0"}, "-keys must be at least 1"},
		{"no rounds", []string{"-rounds", "0"}, "-rounds must be at least 1"},
		{"argument", []string{"-dur", "1s", "2s"}, `unexpected argument "2s"`},
		{"unknown flag", []string{"-duration", "1s"}, "flag provided but not defined: -duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-limiters", "MutexMap", "-keys", "100", "-warmup", "0s", "-dur", "1ms"}, tc.args...)
			out, stderr, code := steady(t, missing, args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
			if strings.Contains(stderr, "measurement failed") || strings.Contains(stderr, "panic") || out != "" {
				t.Errorf("something was measured or it panicked; stdout:\n%s\nstderr:\n%s", out, stderr)
			}
		})
	}
}

// TestInterruptRemovesTheFiles measures RatedbFile (a database in a
// temporary directory) with a ten-minute warm-up and a CPU profile, and
// sends the command SIGINT once the measurement has begun and the directory
// exists: it must stop,
// exit 130 with "interrupted" on stderr and no table, remove the
// database's directory and stop the CPU profile. Before, the signal ended
// it at once, the directory left in TMPDIR and the profile empty.
func TestInterruptRemovesTheFiles(t *testing.T) {
	tmp := t.TempDir()
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	p := cmdtest.Start(t, cmdtest.Cmd{TempDir: tmp}, "-limiters", "RatedbFile", "-patterns", "roundrobin", "-keys", "1000",
		"-warmup", "10m", "-dur", "1s", "-cpuprofile", prof)
	p.WaitStderr(t, "RatedbFile/roundrobin round 1: 1000 keys", time.Minute)
	cmdtest.WaitEntry(t, tmp, "ratedb-bench-", time.Minute)
	p.Signal(t, syscall.SIGINT)
	out, stderr, code := p.Wait(t, time.Minute)
	if code != 130 || out != "" {
		t.Errorf("exit status %d, want 130 and no table; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "steady: interrupted by SIGINT") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr)
	}
	cmdtest.RequireEmpty(t, tmp)
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("the CPU profile holds %d bytes and no gzip header: it was not stopped", len(b))
	}
}
