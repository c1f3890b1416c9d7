// Package cmdtest runs a bench command in a process of its own from the
// command's tests, so that a test sees the command's real exit status and
// what it leaves behind (os.Exit skips deferred clean-up, which a call of
// main in the test's own process would hide). It is imported by tests only.
package cmdtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// childEnv marks a test binary that Run started to be the command.
const childEnv = "BENCH_CMDTEST_RUN_MAIN"

// Main is the first call of a command's TestMain: in a process started by
// Run, it runs main and exits with status 0 when main returns (main exits
// with its own status otherwise); in any other process it returns at once.
func Main(main func()) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
}

// Cmd says how Run starts the command.
type Cmd struct {
	TempDir string   // the command's TMPDIR ("": the test's environment's)
	Env     []string // further environment variables, after the test's own
	Stdout  *os.File // the command's stdout (nil: captured and returned)
}

// Run runs the test binary as the command (see Main) with args, and returns
// its stdout (when captured), its stderr and its exit status. A process
// the command left running that holds its output open is not waited for
// beyond 2 s after the command exits. It fails t if the command cannot be
// run at all.
func Run(t testing.TB, c Cmd, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	if c.TempDir != "" {
		cmd.Env = append(cmd.Env, "TMPDIR="+c.TempDir)
	}
	cmd.Env = append(cmd.Env, c.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// RequireEmpty fails t unless dir is empty: the command left nothing in
// its TMPDIR.
func RequireEmpty(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
}
