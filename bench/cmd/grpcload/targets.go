package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/ratedb/ratedb/bench/internal/cmdsig"
)

// noopServer answers every ShouldRateLimit with OK and nothing else.
type noopServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

func (noopServer) ShouldRateLimit(_ context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	st := make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.GetDescriptors()))
	for i := range st {
		st[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: st}, nil
}

// serveNoop is the child process of the noop target.
func serveNoop(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	g := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(g, noopServer{})
	_ = g.Serve(l)
}

func startNoop(ctx context.Context) (string, []int, func(), error) {
	addr, err := freeAddr()
	if err != nil {
		return "", nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, nil, err
	}
	cmd := cmdsig.Command(ctx, self, "-serve-noop", addr)
	return serveOn(ctx, cmd, addr)
}

func startRatedb(ctx context.Context, o options, tmp, cfgDir string) (string, []int, func(), error) {
	bin := o.ratedb
	if bin == "" {
		bin = filepath.Join(tmp, "ratedb")
	}
	if _, err := os.Stat(bin); err != nil {
		build := cmdsig.Command(ctx, "go", "build", "-o", bin, "github.com/ratedb/ratedb/cmd/ratedb")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return "", nil, nil, fmt.Errorf("building ratedb: %w", err)
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return "", nil, nil, err
	}
	db := filepath.Join(tmp, "ratedb.db")
	_ = os.Remove(db) // every round starts from an empty file
	cmd := cmdsig.Command(ctx, bin, "serve", "--db", db, "--http", "127.0.0.1:0",
		"--grpc", addr, "--envoy-config", cfgDir, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "RATEDB_API_KEYS=bench-key-not-used-0123456789")
	return serveOn(ctx, cmd, addr)
}

// startEnvoyRatelimit installs envoyproxy/ratelimit at the pinned version
// into tmp, starts a redis-server and the service.
func startEnvoyRatelimit(ctx context.Context, tmp string) (string, []int, func(), error) {
	gobin := filepath.Join(tmp, "gobin")
	if err := installEnvoyRatelimit(ctx, gobin); err != nil {
		return "", nil, nil, err
	}
	redisAddr, err := freeAddr()
	if err != nil {
		return "", nil, nil, err
	}
	redis := cmdsig.Command(ctx, "redis-server", "--port", port(redisAddr), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	redisExited, stopRedis, err := startProcess(redis)
	if err != nil {
		return "", nil, nil, fmt.Errorf("redis-server (apt-get install redis-server): %w", err)
	}
	if err := waitTCP(ctx, redisAddr, redisExited); err != nil {
		stopRedis()
		return "", nil, nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		stopRedis()
		return "", nil, nil, err
	}
	httpAddr, _ := freeAddr()
	debugAddr, _ := freeAddr()
	svc := cmdsig.Command(ctx, filepath.Join(gobin, "service_cmd"))
	svc.Env = append(os.Environ(),
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL="+redisAddr, "USE_STATSD=false", "LOG_LEVEL=warn",
		"RUNTIME_ROOT="+filepath.Join(tmp, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"GRPC_HOST=127.0.0.1", "GRPC_PORT="+port(addr), "HOST=127.0.0.1", "PORT="+port(httpAddr),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT="+port(debugAddr),
	)
	// Its stats sink logs every timer at debug level whatever LOG_LEVEL
	// says: keep its output in a file, shown only if it fails to start.
	logPath := filepath.Join(tmp, "envoy-ratelimit.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		stopRedis()
		return "", nil, nil, err
	}
	exited, stopSvc, err := startProcessTo(svc, logFile)
	if err != nil {
		stopRedis()
		return "", nil, nil, err
	}
	stop := func() { stopSvc(); stopRedis(); logFile.Close() }
	if err := waitServing(ctx, addr, exited); err != nil {
		stop()
		out, _ := os.ReadFile(logPath)
		return "", nil, nil, fmt.Errorf("%w\n%s", err, tail(out, 4000))
	}
	return addr, []int{svc.Process.Pid, redis.Process.Pid}, stop, nil
}

// waitTCP polls addr until it accepts a connection (or 30 s, or ctx
// ends).
func waitTCP(ctx context.Context, addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited", addr)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		if err := cmdsig.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// cpuOf sums utime+stime of the processes (and their threads) from
// /proc/PID/stat.
func cpuOf(pids []int) (time.Duration, error) {
	const hz = 100 // USER_HZ on Linux
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0, err
		}
		s := string(b)
		// Fields after the command name (which may hold spaces) in parentheses.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		// utime and stime are fields 14 and 15 of the line: 11 and 12 here.
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("parsing /proc/%d/stat", pid)
		}
		ticks += ut + st
	}
	return time.Duration(ticks) * time.Second / hz, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// installEnvoyRatelimit installs the pinned envoyproxy/ratelimit into gobin
// unless it is there already.
func installEnvoyRatelimit(ctx context.Context, gobin string) error {
	if _, err := os.Stat(filepath.Join(gobin, "service_cmd")); err == nil {
		return nil
	}
	install := cmdsig.Command(ctx, "go", "install", "github.com/envoyproxy/ratelimit/src/service_cmd@"+envoyRatelimitVersion)
	install.Env = append(os.Environ(), "GOBIN="+gobin, "GOWORK=off", "GOFLAGS=")
	install.Stdout, install.Stderr = os.Stderr, os.Stderr
	if err := install.Run(); err != nil {
		return fmt.Errorf("installing envoyproxy/ratelimit: %w", err)
	}
	return nil
}

// serveOn starts cmd, a gRPC server that will listen on addr, and waits
// until it serves; it returns addr, the process's pid and a stop function.
func serveOn(ctx context.Context, cmd *exec.Cmd, addr string) (string, []int, func(), error) {
	exited, stop, err := startProcess(cmd)
	if err != nil {
		return "", nil, nil, err
	}
	if err := waitServing(ctx, addr, exited); err != nil {
		stop()
		return "", nil, nil, err
	}
	return addr, []int{cmd.Process.Pid}, stop, nil
}
