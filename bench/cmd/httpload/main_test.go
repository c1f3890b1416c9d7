package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// mainEnv makes the test binary run main (the command itself, with its own
// exit status) instead of the tests. The do-nothing server's process,
// started from this binary, inherits it.
const mainEnv = "HTTPLOAD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		main()
		os.Exit(0) // main returned: the command's exit status is 0
	}
	os.Exit(m.Run())
}

// httpload runs the command in a process of its own with args and TMPDIR
// set to tmpdir, and returns its stdout, stderr and exit status.
func httpload(t *testing.T, tmpdir string, args ...string) (string, string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", "TMPDIR="+tmpdir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// Should a service outlive the command, stop reading soon after the
	// command exits rather than wait for it.
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestBadFlagsExitBeforeStarting: each bad flag value exits 2 with a
// message naming it, before anything is built or started (the command's
// TMPDIR stays empty). -clients 0 used to panic in a connection's
// goroutine once the do-nothing server was serving, which ended the
// process with that server still running and two temporary directories
// left behind; -rounds 0 panicked, -conns 0 measured nothing and exited 0,
// and an unknown target was found only when its turn came, after the
// targets before it had been measured.
func TestBadFlagsExitBeforeStarting(t *testing.T) {
	tmp := t.TempDir()
	// The same flags with good values: a short run of the do-nothing
	// server exits 0 and leaves nothing behind.
	out, stderr, code := httpload(t, tmp, "-targets", "noop", "-warmup", "0s", "-duration", "50ms", "-rounds", "1",
		"-conns", "2", "-clients", "10", "-routes", "2")
	if code != 0 || !strings.Contains(out, "| noop |") {
		t.Fatalf("good flags: exit status %d, want 0 and a table; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no clients", []string{"-clients", "0"}, "-clients must be at least 1"},
		{"no routes", []string{"-routes", "0"}, "-routes must be at least 1"},
		{"no conns", []string{"-conns", "0"}, "-conns must be at least 1"},
		{"no rounds", []string{"-rounds", "0"}, "-rounds must be at least 1"},
		{"no duration", []string{"-duration", "0s"}, "-duration must be above 0"},
		{"unknown target", []string{"-targets", "noop,ratedbb"}, `-targets: unknown target "ratedbb"`},
		{"empty target", []string{"-targets", "noop,"}, `-targets: unknown target ""`},
		{"target twice", []string{"-targets", "noop,noop"}, "-targets names noop twice"},
		{"argument", []string{"-rounds", "1", "2"}, `unexpected argument "2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-targets", "noop", "-warmup", "0s", "-duration", "10ms"}, tc.args...)
			out, stderr, code := httpload(t, tmp, args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if !strings.Contains(stderr, "httpload: "+tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "round 1/") || out != "" {
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
