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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	cmd := command(exe, c, args)
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

// command returns the test binary's command running as the bench command
// (see Main), with args and c's environment.
func command(exe string, c Cmd, args []string) *exec.Cmd {
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	if c.TempDir != "" {
		cmd.Env = append(cmd.Env, "TMPDIR="+c.TempDir)
	}
	cmd.Env = append(cmd.Env, c.Env...)
	return cmd
}

// Proc is a command started by Start and still running until Wait.
type Proc struct {
	cmd    *exec.Cmd
	stderr watched
	stdout bytes.Buffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// watched is a buffer whose writes wake the readers waiting on changed.
type watched struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	close(w.changed)
	w.changed = make(chan struct{})
	return len(p), nil
}

func (w *watched) snapshot() (string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String(), w.changed
}

// Start starts the test binary as the command (see Main) with args, as Run
// does, and returns without waiting for it; c.Stdout is ignored (stdout is
// kept for Wait). The process is killed when t ends if it still runs.
func Start(t testing.TB, c Cmd, args ...string) *Proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proc{cmd: command(exe, c, args), exited: make(chan struct{})}
	p.stderr.changed = make(chan struct{})
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 2 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// Pid returns the command's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// WaitStderr waits until the command's stderr holds s and fails t if it
// exits first or timeout passes.
func (p *Proc) WaitStderr(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		got, changed := p.stderr.snapshot()
		if strings.Contains(got, s) {
			return
		}
		select {
		case <-changed:
		case <-p.exited:
			got, _ = p.stderr.snapshot()
			if !strings.Contains(got, s) {
				t.Fatalf("the command exited (%v) before printing %q; stderr:\n%s", p.err, s, got)
			}
			return
		case <-timer.C:
			t.Fatalf("the command did not print %q within %v; stderr:\n%s", s, timeout, got)
		}
	}
}

// Signal sends sig to the command's process (not to its children).
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Wait waits for the command to exit, at most timeout (then it kills it
// and fails t), and returns its stdout, stderr and exit status (-1 for a
// process ended by a signal).
func (p *Proc) Wait(t testing.TB, timeout time.Duration) (stdout, stderr string, code int) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		got, _ := p.stderr.snapshot()
		t.Fatalf("the command did not exit within %v; stderr:\n%s", timeout, got)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(p.err, &ee):
		code = ee.ExitCode()
	case p.err != nil:
		t.Fatal(p.err)
	}
	stderr, _ = p.stderr.snapshot()
	return p.stdout.String(), stderr, code
}

// Children returns the ids of the processes whose parent is pid, from
// /proc/*/stat.
func Children(t testing.TB, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // it exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, id)
		}
	}
	return kids
}

// WaitChildren polls, every 20 ms for at most timeout, until the process
// pid has at least n children whose command line holds each of match, and
// returns them (the command is another process: there is nothing to
// synchronise on but /proc). It fails t on timeout.
func WaitChildren(t testing.TB, pid, n int, timeout time.Duration, match ...string) []int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var found []int
		for _, k := range Children(t, pid) {
			cl, err := os.ReadFile("/proc/" + strconv.Itoa(k) + "/cmdline")
			if err != nil {
				continue
			}
			ok := true
			for _, m := range match {
				ok = ok && bytes.Contains(cl, []byte(m))
			}
			if ok {
				found = append(found, k)
			}
		}
		if len(found) >= n {
			return found
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d has %d children matching %q after %v, want %d", pid, len(found), match, timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitEntry polls, every 20 ms for at most timeout, until dir holds an
// entry whose name starts with prefix (something the command made; it is
// another process, so there is nothing to synchronise on but the file
// system). It fails t on timeout.
func WaitEntry(t testing.TB, dir, prefix string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing named %s* in %s after %v", prefix, dir, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RequireGone fails t for each of pids still running (kill(pid, 0)
// succeeds): a child the command left behind.
func RequireGone(t testing.TB, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child process %d is still running (kill 0: %v)", pid, err)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
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

// ShellWords returns the words a POSIX shell (sh) splits line into, each
// as the command it names would receive it: a report's command line must
// give back the arguments of its run. It skips t when there is no sh.
func ShellWords(t testing.TB, line string) []string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to split the command line with")
	}
	// printf ends each word with a NUL, which no argument can hold.
	out, err := exec.Command(sh, "-c", "set -- "+line+`; for a in "$@"; do printf '%s\0' "$a"; done`).CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v: %s\nthe line: %s", err, out, line)
	}
	words := strings.Split(string(out), "\x00")
	return words[:len(words)-1] // after the last NUL: nothing
}

// CheckCommand finds in text the command line that follows pre and ends
// with suf, and checks that a shell splits it into want: a report's
// command must give back the arguments of its run.
func CheckCommand(t testing.TB, text, pre, suf string, want []string) {
	t.Helper()
	_, rest, ok := strings.Cut(text, pre)
	if !ok {
		t.Fatalf("no command line in:\n%s", text)
	}
	line, _, _ := strings.Cut(rest, "\n")
	line, ok = strings.CutSuffix(line, suf)
	if !ok {
		t.Fatalf("the command line does not end with %q: %q", suf, line)
	}
	if got := ShellWords(t, line); !slices.Equal(got, want) {
		t.Errorf("the shell reads the command %s as %q, want %q", line, got, want)
	}
}
