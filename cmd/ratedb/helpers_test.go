package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/stretchr/testify/require"
)

const (
	clientKey = "client-key-for-tests"
	adminKey  = "admin-key-for-tests"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary builds the ratedb command once per test run.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "ratedb-e2e-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "ratedb")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

// service is a running `ratedb serve`.
type service struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	db     string
	stderr *proctest.SyncBuffer
	done   chan struct{}
	err    error
}

var addrRE = regexp.MustCompile(`msg=listening addr=(\S+)|"msg":"listening","addr":"([^"]+)"`)

// start runs `ratedb serve` on a free loopback port with the state file db
// and the test keys, and waits until it listens. With --redis in args, db
// is not passed (serve refuses --db with --redis): give "".
func start(t *testing.T, db string, args ...string) *service {
	t.Helper()
	return startEnv(t, db, []string{"RATEDB_API_KEYS=" + clientKey, "RATEDB_ADMIN_KEYS=" + adminKey}, args...)
}

// startNoKeys starts the service without any configured key.
func startNoKeys(t *testing.T, db string, args ...string) *service {
	t.Helper()
	return startEnv(t, db, []string{"RATEDB_API_KEYS=", "RATEDB_ADMIN_KEYS="}, args...)
}

func startEnv(t *testing.T, db string, env []string, args ...string) *service {
	t.Helper()
	s := &service{t: t, db: db, stderr: &proctest.SyncBuffer{}, done: make(chan struct{})}
	all := []string{"serve", "--http", "127.0.0.1:0"}
	if !givesRedis(args) {
		all = append(all, "--db", db)
	}
	all = append(all, args...)
	s.cmd = exec.Command(binary(t), all...)
	s.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	s.cmd.Stderr = pw
	require.NoError(t, s.cmd.Start())
	go func() {
		s.err = s.cmd.Wait()
		pw.Close()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.stderr, line)
			if m := addrRE.FindStringSubmatch(line); m != nil && !sent {
				addr <- m[1] + m[2]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.done:
		t.Fatalf("ratedb serve exited: %v\n%s", s.err, s.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("ratedb serve did not listen in time\n%s", s.stderr)
	}
	return s
}

// givesRedis reports whether args give --redis (with one dash or two, its
// value apart or after '=').
func givesRedis(args []string) bool {
	for _, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == "redis" || strings.HasPrefix(a, "redis=") {
			return true
		}
	}
	return false
}

// stop sends sig and waits for the process to exit, returning its exit code.
func (s *service) stop(sig syscall.Signal) int {
	s.t.Helper()
	require.NoError(s.t, s.cmd.Process.Signal(sig))
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Fatalf("ratedb serve did not exit after %v\n%s", sig, s.stderr)
	}
	return s.cmd.ProcessState.ExitCode()
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// do sends a request and returns the status, the headers and the body.
func (s *service) do(method, path, key, body string) (int, http.Header, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	require.NoError(s.t, err)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := client.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// decision is the data of a check answer.
type decision struct {
	Status string `json:"status"`
	Limit  int64  `json:"limit"`
	Remain int64  `json:"remain"`
	Reset  int64  `json:"reset_in_second"`
	Tiers  []struct {
		Limit  int64  `json:"limit"`
		Remain int64  `json:"remain"`
		Reset  int64  `json:"reset_in_second"`
		Window string `json:"window"`
	} `json:"tiers"`
}

type answer struct {
	Meta struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
		Status  string `json:"status"`
	} `json:"meta"`
	Data json.RawMessage `json:"data"`
}

// check performs one check with the client key and returns the decision.
func (s *service) check(clientID, route string) decision {
	s.t.Helper()
	code, _, body := s.do("POST", "/v1/check", clientKey, fmt.Sprintf(`{"client_id":%q,"route":%q}`, clientID, route))
	require.Equal(s.t, http.StatusOK, code, body)
	var a answer
	require.NoError(s.t, json.Unmarshal([]byte(body), &a), body)
	var d decision
	require.NoError(s.t, json.Unmarshal(a.Data, &d), body)
	return d
}

// runTool runs a ratedb subcommand and returns its stdout, stderr and exit
// code.
func runTool(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runToolWithin(t, time.Minute, args...)
}

// runToolWithin runs the ratedb command with args and returns its stdout,
// stderr and exit code; it fails the test if the command has not exited
// within d (a tool that serves instead of exiting, or hangs).
func runToolWithin(t *testing.T, d time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "ratedb %v did not finish within %v", args, d)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}
