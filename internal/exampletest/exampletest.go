// Package exampletest builds and runs the example programs as real
// processes, for their tests.
package exampletest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Build compiles the package in the current directory (a test's working
// directory is its package's) and returns the binary's path.
func Build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "example")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Run runs bin with args to completion and returns its standard output.
func Run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, out)
	}
	return string(out)
}

// Server is an example program running in the background.
type Server struct {
	cmd   *exec.Cmd
	lines chan string
	Addr  string // what the program printed after "listening on "
}

// Start runs bin with args and waits (up to a minute) for the line
// "listening on <addr>" on its standard output. The test's cleanup kills
// the process if it is still running.
func Start(t *testing.T, bin string, args ...string) *Server {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{cmd: cmd, lines: make(chan string, 16)}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-s.lines:
		if !ok || !strings.HasPrefix(line, "listening on ") {
			t.Fatalf("%s did not start: first line %q", filepath.Base(bin), line)
		}
		s.Addr = strings.TrimPrefix(line, "listening on ")
	case <-time.After(time.Minute):
		t.Fatalf("%s did not start within a minute", filepath.Base(bin))
	}
	return s
}

// Stop sends SIGTERM and waits (up to a minute) for the process to exit. It
// returns the rest of its standard output and its exit error.
func (s *Server) Stop(t *testing.T) (rest string, err error) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				return b.String(), s.cmd.Wait()
			}
			b.WriteString(line + "\n")
		case <-timeout:
			t.Fatal("the server did not stop within a minute of SIGTERM")
		}
	}
}
