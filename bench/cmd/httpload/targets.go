package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const benchKey = "bench-client-key"

func checkBody(client, route string) []byte {
	return []byte(`{"client_id":"` + client + `","route":"` + route + `"}`)
}

// startRatedb builds ratedb from this checkout and serves it with an
// embedded state file and a rule roomy enough that every call is allowed.
func startRatedb(ctx context.Context, dir string, o options) (*target, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "ratedb")
	if _, err := os.Stat(bin); err != nil {
		log.Printf("building ratedb")
		if err := goCmd(ctx, root, nil, "build", "-o", bin, "./cmd/ratedb"); err != nil {
			return nil, err
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := []string{"RATEDB_API_KEYS=" + benchKey}
	if o.cpuprofile != "" {
		// ratedb serve writes the profile when it stops (see README).
		env = append(env, "RATEDB_CPUPROFILE="+o.cpuprofile)
	}
	cmd, exited, stop, err := startProc(ctx, dir, "ratedb", env, bin,
		"serve", "--http", addr, "--db", filepath.Join(dir, fmt.Sprintf("bench-%d.db", time.Now().UnixNano())), "--default-limit", "1000000", "--default-window", "1m")
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+addr+"/healthz", bin, exited); err != nil {
		stop()
		return nil, err
	}
	allow := []byte(`"status":"Allow"`)
	return &target{
		url:    "http://" + addr + "/v1/check",
		header: http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {benchKey}},
		pids:   []int{cmd.Process.Pid},
		body:   checkBody,
		ok:     func(s int, b []byte) bool { return s == 200 && bytes.Contains(b, allow) },
		stop:   stop,
	}, nil
}

// serveNoop is the do-nothing server: it reads the request and answers a
// fixed Allow body of the same shape as ratedb's.
func serveNoop(addr string) error {
	answer := []byte(`{"meta":{"message":"success","code":200,"status":"ok"},"data":{"status":"Allow","limit":100,"remain":99,"reset_in_second":41}}`)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})}
	return srv.ListenAndServe()
}

// startNoop runs the do-nothing server in a child process (this program).
func startNoop(ctx context.Context) (*target, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "httpload-noop-")
	if err != nil {
		return nil, err
	}
	cmd, exited, stop, err := startProc(ctx, dir, "noop", nil, self, "-serve-noop", addr)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+addr+"/", self, exited); err != nil {
		stop()
		os.RemoveAll(dir)
		return nil, err
	}
	return &target{
		url:    "http://" + addr + "/v1/check",
		header: http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {benchKey}},
		pids:   []int{cmd.Process.Pid},
		body:   checkBody,
		ok:     func(s int, b []byte) bool { return s == 200 },
		stop:   func() { stop(); os.RemoveAll(dir) },
	}, nil
}

// startEnvoyRatelimit installs envoyproxy/ratelimit (once, into o.gobin),
// starts a redis-server and the service with a config of one limit per
// client_id and route, and loads its HTTP /json endpoint.
func startEnvoyRatelimit(ctx context.Context, dir string, o options) (*target, error) {
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed: %w", err)
	}
	bin := filepath.Join(o.gobin, "service_cmd")
	if _, err := os.Stat(bin); err != nil {
		log.Printf("installing envoyproxy/ratelimit %s into %s (once)", ratelimitVersion, o.gobin)
		ictx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		defer cancel()
		if err := goCmd(ictx, os.TempDir(), []string{"GOBIN=" + o.gobin, "GOFLAGS=-mod=mod", "GOWORK=off"},
			"install", "github.com/envoyproxy/ratelimit/src/service_cmd@"+ratelimitVersion); err != nil {
			return nil, err
		}
	}
	raddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	rport := raddr[strings.LastIndexByte(raddr, ':')+1:]
	rcmd, _, rstop, err := startProc(ctx, dir, "redis", nil, redisBin, "--port", rport, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err != nil {
		return nil, err
	}
	_ = rcmd
	cfgDir := filepath.Join(dir, "runtime", "current", "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		rstop()
		return nil, err
	}
	cfg := "domain: bench\ndescriptors:\n  - key: client_id\n    descriptors:\n      - key: route\n        rate_limit:\n          unit: minute\n          requests_per_unit: 1000000\n"
	if err := os.WriteFile(filepath.Join(cfgDir, "bench.yaml"), []byte(cfg), 0o644); err != nil {
		rstop()
		return nil, err
	}
	addr, _ := freeAddr()
	gaddr, _ := freeAddr()
	daddr, _ := freeAddr()
	port := func(a string) string { return a[strings.LastIndexByte(a, ':')+1:] }
	env := []string{
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + raddr, "USE_STATSD=false", "LOG_LEVEL=warn",
		"RUNTIME_ROOT=" + filepath.Join(dir, "runtime", "current"), "RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"HOST=127.0.0.1", "PORT=" + port(addr), "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + port(gaddr),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + port(daddr),
	}
	cmd, exited, stop, err := startProc(ctx, dir, "ratelimit", env, bin)
	if err != nil {
		rstop()
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+addr+"/healthcheck", bin, exited); err != nil {
		stop()
		rstop()
		b, _ := os.ReadFile(filepath.Join(dir, "ratelimit.log"))
		return nil, fmt.Errorf("%w\n%s", err, b)
	}
	return &target{
		url:    "http://" + addr + "/json",
		header: http.Header{"Content-Type": {"application/json"}},
		pids:   []int{cmd.Process.Pid, rcmd.Process.Pid},
		body: func(client, route string) []byte {
			return []byte(`{"domain":"bench","descriptors":[{"entries":[{"key":"client_id","value":"` + client +
				`"},{"key":"route","value":"` + route + `"}]}]}`)
		},
		ok:   envoyOK,
		stop: func() { stop(); rstop() },
	}, nil
}

// envoyOK reports whether an answer of envoyproxy/ratelimit's /json (its
// RateLimitResponse in protojson) is an allowed call that the config's limit
// counted: status 200 (OVER_LIMIT answers 429, UNKNOWN 500) and the
// descriptor's status naming its current limit. A descriptor that matches no
// rule of the config is answered OK as well, but with no limit and without a
// Redis call: a call that measured nothing must not count as a fast one. The
// request has one descriptor, so one "currentLimit" is the whole check; it
// is a byte search, as ratedb's is, so that checking costs the generator,
// which shares the machine, alike for both.
func envoyOK(status int, body []byte) bool {
	return status == http.StatusOK && bytes.Contains(body, []byte(`"currentLimit"`))
}
