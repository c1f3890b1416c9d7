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

// compare runs the command in a process of its own with args, TMPDIR set
// to tmpdir and stdout to stdout (nil: a buffer), and returns its stdout
// (when buffered), stderr and exit status.
func compare(t *testing.T, tmpdir string, stdout *os.File, args ...string) (string, string, int) {
	t.Helper()
	return cmdtest.Run(t, cmdtest.Cmd{TempDir: tmpdir, Stdout: stdout}, args...)
}

// TestChildBigRemovesItsDirectory runs the beyond-memory child at a small
// size twice. With a stdout it can write to, it prints its result, exits 0
// and removes the directory of its database file. With a stdout it cannot
// write to (a file opened read-only), printing the result fails: it must
// exit 1 and still remove the directory, which log.Fatal used to leave
// behind (os.Exit runs no deferred function), file and all: at the
// default -big, a 10,000,000-window file.
func TestChildBigRemovesItsDirectory(t *testing.T) {
	args := []string{"-child-big", "-big", "1000", "-bighot", "100", "-bighits", "1000"}
	tmp := t.TempDir()
	out, stderr, code := compare(t, tmp, nil, args...)
	if code != 0 || !strings.Contains(out, "BENCH-CHILD-RESULT ") {
		t.Fatalf("exit status %d, want 0 and a result; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	cmdtest.RequireEmpty(t, tmp)

	ro, err := os.Open(os.DevNull) // read-only: every write to it fails
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, stderr, code = compare(t, tmp, ro, args...)
	if code != 1 {
		t.Errorf("stdout not writable: exit status %d, want 1; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "compare: write /dev/stdout") {
		t.Errorf("stderr does not say that the result could not be printed:\n%s", stderr)
	}
	cmdtest.RequireEmpty(t, tmp)
}

// TestBadFlagsExitBeforeMeasuring: each bad flag value exits 2 with a
// message naming it, before anything is measured or any directory made
// (-nobig and -quick keep the run short should a check be missing, and
// TMPDIR is missing, so that a measurement would fail with another
// message). -runs 0 used to fail only when the report was written, after
// the beyond-memory workload, and -bighits 0 only when its child printed a
// NaN hits/s.
func TestBadFlagsExitBeforeMeasuring(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no runs", []string{"-runs", "0"}, "-runs must be at least 1"},
		{"no keys", []string{"-keys", "0"}, "-keys must be at least 1"},
		{"no big windows", []string{"-child-big", "-big", "0"}, "-big must be at least 1"},
		{"no big hits", []string{"-child-big", "-big", "10", "-bighits", "0"}, "-bighits must be at least 1"},
		{"argument", []string{"-runs", "1", "2"}, `unexpected argument "2"`},
		{"unknown flag", []string{"-rounds", "1"}, "flag provided but not defined: -rounds"},
		{"unknown limiter", []string{"-child-mem", "Nope", "-keys", "10"}, `bench: unknown limiter "Nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-quick", "-nobig", "-out", filepath.Join(missing, "results")}, tc.args...)
			out, stderr, code := compare(t, missing, nil, args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "decision checks") || out != "" {
				t.Errorf("something was measured or it panicked; stdout:\n%s\nstderr:\n%s", out, stderr)
			}
		})
	}
}

// TestInterruptStopsTheBigChild runs a quick suite whose beyond-memory
// child would make 2,000,000,000 hits over 3,000,000 windows, and sends
// the command (not the child) SIGINT once the child has filled a million:
// the command must exit 130 with "interrupted" on stderr, the child must
// have stopped (SIGTERM from the command) and removed the directory of its
// database file, and nothing may be left in TMPDIR. Before, the signal
// ended the command at once and the child ran on, an orphan, with its
// database file.
func TestInterruptStopsTheBigChild(t *testing.T) {
	tmp := t.TempDir()
	p := cmdtest.Start(t, cmdtest.Cmd{TempDir: tmp}, "-quick", "-keys", "1000", "-benchtime", "1ms",
		"-big", "3000000", "-bighot", "100000", "-bighits", "2000000000", "-out", filepath.Join(t.TempDir(), "results"))
	p.WaitStderr(t, "beyond: filled 1000000 windows", 5*time.Minute)
	kids := cmdtest.WaitChildren(t, p.Pid(), 1, time.Minute, "-child-big")
	p.Signal(t, syscall.SIGINT)
	_, stderr, code := p.Wait(t, 2*time.Minute)
	if code != 130 {
		t.Errorf("exit status %d, want 130; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "compare: interrupted by SIGINT") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr)
	}
	cmdtest.RequireGone(t, kids...)
	cmdtest.RequireEmpty(t, tmp)
}

// TestInterruptRemovesTheBigDirectory sends the beyond-memory child itself
// SIGTERM while it fills its database: it must stop, remove the directory
// and exit 143.
func TestInterruptRemovesTheBigDirectory(t *testing.T) {
	tmp := t.TempDir()
	p := cmdtest.Start(t, cmdtest.Cmd{TempDir: tmp}, "-child-big", "-big", "3000000", "-bighot", "100000", "-bighits", "2000000000")
	p.WaitStderr(t, "beyond: filled 1000000 windows", 5*time.Minute)
	p.Signal(t, syscall.SIGTERM)
	out, stderr, code := p.Wait(t, 2*time.Minute)
	if code != 143 || out != "" {
		t.Errorf("exit status %d, want 143 and no result; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "compare: interrupted by SIGTERM") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr)
	}
	cmdtest.RequireEmpty(t, tmp)
}
