package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

func TestMain(m *testing.M) {
	cmdtest.Main(main) // also in the do-nothing server's process, which inherits the environment
	os.Exit(m.Run())
}

// httpload runs the command in a process of its own with args and TMPDIR
// set to tmpdir, and returns its stdout, stderr and exit status.
func httpload(t *testing.T, tmpdir string, args ...string) (string, string, int) {
	t.Helper()
	return cmdtest.Run(t, cmdtest.Cmd{TempDir: tmpdir}, args...)
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

// TestFailedCallsFail measures a target that answers every call 200 and
// one that answers every other call 500 (each an httptest server started
// by the start function run is given). The first run returns nil and
// writes -out; the second must return an error and not write -out: it
// used to print the table with its errors column, write it to -out and
// exit 0, so a script took figures of failed calls for results. Both
// leave nothing in TMPDIR.
func TestFailedCallsFail(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	o := options{duration: 50 * time.Millisecond, conns: 2, rounds: 1, clients: 10, routes: 2, targets: "fake"}
	startWith := func(fail bool) func(ctx context.Context, name, dir string, o options) (*target, error) {
		return func(ctx context.Context, name, dir string, o options) (*target, error) {
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if fail && n.Add(1)%2 == 0 {
					w.WriteHeader(http.StatusInternalServerError)
				}
			}))
			return &target{
				url:    srv.URL,
				header: http.Header{"Content-Type": {"application/json"}},
				pids:   []int{os.Getpid()},
				body:   checkBody,
				ok:     func(s int, b []byte) bool { return s == http.StatusOK },
				stop:   srv.Close,
			}, nil
		}
	}

	o.out = filepath.Join(t.TempDir(), "good.md")
	if err := run(context.Background(), o, startWith(false)); err != nil {
		t.Fatalf("every call answered 200: %v", err)
	}
	if b, err := os.ReadFile(o.out); err != nil || !strings.Contains(string(b), "| fake |") {
		t.Fatalf("every call answered 200: -out (err %v) lacks the row:\n%s", err, b)
	}

	o.out = filepath.Join(t.TempDir(), "bad.md")
	err := run(context.Background(), o, startWith(true))
	if err == nil || !strings.Contains(err.Error(), "measured calls failed") {
		t.Errorf("every other call answered 500: run returned %v, want the failed calls", err)
	}
	if _, err := os.Stat(o.out); !os.IsNotExist(err) {
		t.Errorf("every other call answered 500: -out was written (stat: %v)", err)
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in TMPDIR: %s", e.Name())
	}
}

// TestInterruptStopsTheServer runs the do-nothing target with a
// ten-minute warm-up and sends the command SIGINT once the warm-up has
// begun: it must stop, exit 130 with "interrupted" on stderr, and leave
// neither the server running nor its two temporary directories in TMPDIR.
// Before, the signal ended the command at once and the server ran on, an
// orphan, with both directories left behind.
func TestInterruptStopsTheServer(t *testing.T) {
	tmp := t.TempDir()
	p := cmdtest.Start(t, cmdtest.Cmd{TempDir: tmp}, "-targets", "noop", "-warmup", "10m", "-duration", "10m",
		"-rounds", "1", "-conns", "1", "-clients", "10", "-routes", "2")
	p.WaitStderr(t, "round 1/1, noop: warm-up", time.Minute)
	kids := cmdtest.WaitChildren(t, p.Pid(), 1, time.Minute, "-serve-noop")
	p.Signal(t, syscall.SIGINT)
	_, stderr, code := p.Wait(t, time.Minute)
	if code != 130 {
		t.Errorf("exit status %d, want 130; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "httpload: interrupted by SIGINT") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr)
	}
	cmdtest.RequireGone(t, kids...)
	cmdtest.RequireEmpty(t, tmp)
}
