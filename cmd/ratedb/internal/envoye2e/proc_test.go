package envoye2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ratedb-envoy-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ratedb")
	build := exec.Command("go", "build", "-o", binary, "github.com/ratedb/ratedb/cmd/ratedb")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ratedb:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

const adminKey = "e2e-admin-key-0123456789"

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

type proc struct {
	cmd      *exec.Cmd
	logs     *proctest.SyncBuffer
	grpcAddr string
	httpAddr string
	exited   chan struct{}
}

// startProc starts `ratedb serve` with a state file db, --grpc and --http on
// loopback port 0 and extra flags, and waits until both listeners are up.
// With --redis in extra, db is not passed (serve refuses --db with
// --redis): give "".
func startProc(t *testing.T, db string, extra ...string) *proc {
	t.Helper()
	return startProcWith(t, nil, db, extra...)
}

// startProcWith is startProc with attr (nil: the test's own) for the
// process, to run it as another user.
func startProcWith(t *testing.T, attr *syscall.SysProcAttr, db string, extra ...string) *proc {
	t.Helper()
	args := []string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--log-format", "json"}
	if !givesRedis(extra) {
		args = append(args, "--db", db)
	}
	args = append(args, extra...)
	cmd := exec.Command(binary, args...)
	cmd.SysProcAttr = attr
	cmd.Env = append(os.Environ(), "RATEDB_API_KEYS=e2e-client-key-0123456789", "RATEDB_ADMIN_KEYS="+adminKey)
	pr, pw := io.Pipe()
	p := &proc{cmd: cmd, logs: &proctest.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = io.MultiWriter(p.logs, pw)
	require.NoError(t, cmd.Start())
	go func() { _ = cmd.Wait(); _ = pw.Close(); close(p.exited) }()
	t.Cleanup(func() { p.kill() })

	addrs := make(chan [2]string, 1)
	go func() {
		var grpcAddr, httpAddr string
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch {
			case strings.HasPrefix(line.Msg, "listening (gRPC"):
				grpcAddr = line.Addr
			case line.Msg == "listening":
				httpAddr = line.Addr
			}
			if grpcAddr != "" && httpAddr != "" {
				addrs <- [2]string{grpcAddr, httpAddr}
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case a := <-addrs:
		p.grpcAddr, p.httpAddr = a[0], a[1]
	case <-p.exited:
		t.Fatalf("ratedb exited early: %s", p.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("ratedb did not start: %s", p.logs.String())
	}
	return p
}

func (p *proc) kill() {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("ratedb did not stop after SIGTERM")
	}
	require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), p.logs.String())
}

func (p *proc) client(t *testing.T, creds credentials.TransportCredentials) rlsv3.RateLimitServiceClient {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// get fetches an HTTP path with the admin key.
func (p *proc) get(t *testing.T, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.httpAddr+path, nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", adminKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func desc(pairs ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(pairs); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: pairs[i], Value: pairs[i+1]})
	}
	return d
}

func call(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, hits uint32, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs, HitsAddend: hits})
	require.NoError(t, err)
	require.Len(t, resp.GetStatuses(), len(descs))
	return resp
}

// eventually polls cond every 20 ms until it holds or 20 s pass (for an
// external process to act on a signal or a file change).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	// The temporary file is written beside the config directory, not in
	// it: the service loads every file of the directory.
	tmp := filepath.Join(filepath.Dir(filepath.Dir(path)), filepath.Base(path)+".tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(data), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func execCommand(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, binary, args...)
}

// clearOfBoundary waits, when the next boundary of scale-long epoch-aligned
// windows is less than margin away, until it has passed: a test making a
// few dozen calls against a minute limit then runs inside one window. (The
// binary uses the wall clock; this waits for the clock, not for background
// work.)
func clearOfBoundary(scale, margin time.Duration) {
	now := time.Now()
	next := now.Truncate(scale).Add(scale)
	if next.Sub(now) < margin {
		time.Sleep(next.Sub(now) + 50*time.Millisecond)
	}
}
