// Command grpcload measures, in one run on one machine, the Envoy rate limit
// protocol (envoy.service.ratelimit.v3 ShouldRateLimit) served by:
//
//   - noop: a do-nothing gRPC server answering OK (the ceiling of the
//     machine while the generator shares it), run as a child process;
//   - ratedb: `ratedb serve --grpc` with its embedded state file;
//   - envoy-ratelimit: envoyproxy/ratelimit (installed with go install at
//     the version pinned in envoyRatelimitVersion) with a local
//     redis-server.
//
// Every target gets the same config (one domain, a key-only descriptor so
// each of the -values values has its own counter, a limit no run reaches)
// and the same load: -workers concurrent callers over -conns connections,
// each call one descriptor with a random value, a warm-up, then -duration
// of measurement. It reports calls/s, p50/p99 latency and the CPU the
// service used (utime+stime from /proc/PID/stat, plus redis-server's for
// envoy-ratelimit) per 1,000 calls, and writes the table to -out.
//
// Bad flag values exit 2 before anything is started; a target that fails
// to start or to answer, or (ratedb, envoy-ratelimit) answers a call OK
// without naming the config's limit (a descriptor no rule matched, which
// nothing counted), exits 1, after the servers are stopped and the
// temporary directory removed. SIGINT or SIGTERM stops the run the same
// way, and it then exits 130 or 143.
//
// Run it from bench/: go run ./cmd/grpcload
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ratedb/ratedb/bench/internal/cmdflag"
	"github.com/ratedb/ratedb/bench/internal/cmdsig"
)

// envoyRatelimitVersion pins envoyproxy/ratelimit (it has no tagged module
// versions; this pseudo-version is its main branch of 2026-01-22).
const envoyRatelimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"

const configYAML = `domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 1000000000
`

type options struct {
	workers  int
	conns    int
	values   int
	warmup   time.Duration
	duration time.Duration
	targets  string
	out      string
	args     []string // the command's arguments, shown in the report
	ratedb   string
	rounds   int
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-serve-noop" {
		serveNoop(os.Args[2])
		return
	}
	os.Exit(command(os.Args[1:]))
}

// targetNames are the targets -targets may name.
var targetNames = []string{"noop", "ratedb", "envoy-ratelimit"}

// command is the command with its arguments. It returns the exit status
// once its deferred clean-up (the servers stopped, the temporary directory
// removed) has run: 0 after a full run (and after -h), 2 for bad flags,
// checked before anything is started, 1 when a target fails to start or
// to answer, or the table cannot be written, and 130 or 143 after SIGINT
// or SIGTERM, which stop the run.
func command(args []string) (code int) {
	o := options{args: args}
	fs := flag.NewFlagSet("grpcload", flag.ContinueOnError)
	fs.IntVar(&o.workers, "workers", 64, "concurrent callers (at least 1)")
	fs.IntVar(&o.conns, "conns", 8, "gRPC connections the callers share (at least 1)")
	fs.IntVar(&o.values, "values", 10000, "distinct descriptor values (at least 1)")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "warm-up before measuring")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "measurement time per target (above 0)")
	fs.StringVar(&o.targets, "targets", strings.Join(targetNames, ","), "comma-separated targets, each once: "+strings.Join(targetNames, ", "))
	fs.StringVar(&o.out, "out", "results/GRPC.md", "where to write the results table (\"\": stdout only)")
	fs.StringVar(&o.ratedb, "ratedb", "", "ratedb binary (default: built from ../cmd/ratedb)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every target once, in turn, and the run with the median calls/s is reported (at least 1)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2 // fs printed the error and the usage
	}
	if err := checkFlags(fs.Args(), o); err != nil {
		fmt.Fprintln(os.Stderr, "grpcload:", err)
		return 2
	}
	ctx, stop := cmdsig.Context()
	defer stop()
	defer func() { code = cmdsig.Status(ctx, "grpcload", code) }() // after run's clean-up
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "grpcload:", err)
		return 1
	}
	return 0
}

// checkFlags returns an error naming the first bad value among the
// command's flags, before anything is started: arguments after the flags,
// fewer than one worker, connection, value or round, a measurement time
// that is not positive, a target not in targetNames or one named twice.
// (-values 0 and -conns 0 used to panic once a target was serving, -values
// in a caller goroutine, which ended the process without stopping the
// target's server or removing the temporary directory; -rounds 0 panicked
// after the run, and an unknown target was found only when its turn came.)
func checkFlags(extra []string, o options) error {
	if err := cmdflag.NoArgs(extra); err != nil {
		return err
	}
	switch {
	case o.workers < 1:
		return errors.New("-workers must be at least 1")
	case o.conns < 1:
		return errors.New("-conns must be at least 1")
	case o.values < 1:
		return errors.New("-values must be at least 1")
	case o.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case o.duration <= 0:
		return errors.New("-duration must be above 0")
	}
	return cmdflag.Names("targets", o.targets, targetNames)
}

type result struct {
	target   string
	calls    int64
	errors   int64
	overs    int64
	elapsed  time.Duration
	p50, p99 time.Duration
	cpu      time.Duration // service (+ redis) CPU during the measurement
	// minRate and maxRate are the lowest and highest calls/s of the rounds.
	minRate, maxRate float64
}

// run measures the targets of o, prints the table and writes it to o.out;
// it stops, with an error, once ctx ends.
func run(ctx context.Context, o options) error {
	tmp, err := os.MkdirTemp("", "grpcload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cfgDir := filepath.Join(tmp, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "bench.yaml"), []byte(configYAML), 0o600); err != nil {
		return err
	}
	values := make([]string, o.values)
	for i := range values {
		values[i] = fmt.Sprintf("user-%06d", i)
	}
	start := time.Now()
	load1 := loadavg()
	targets := strings.Split(o.targets, ",")
	runs := make(map[string][]result)
	for round := range o.rounds {
		for _, t := range targets {
			fmt.Fprintf(os.Stderr, "== round %d: %s\n", round+1, t)
			r, err := runTarget(ctx, o, t, tmp, cfgDir, values)
			if err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
			fmt.Fprintf(os.Stderr, "%s: %.0f calls/s p50 %v p99 %v cpu/1k %.1f ms errors %d\n", t, r.rate(), r.p50, r.p99, r.cpuPer1k(), r.errors)
			runs[t] = append(runs[t], r)
		}
	}
	var results []result
	for _, t := range targets {
		rs := runs[t]
		slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(a.rate(), b.rate()) })
		med := rs[len(rs)/2]
		med.minRate, med.maxRate = rs[0].rate(), rs[len(rs)-1].rate()
		results = append(results, med)
	}
	report := format(o, results, start, load1, loadavg())
	fmt.Print(report)
	if o.out != "" {
		return os.WriteFile(o.out, []byte(report), 0o644)
	}
	return nil
}

// runTarget starts target t, measures it and stops it (also when ctx ends
// first).
func runTarget(ctx context.Context, o options, t, tmp, cfgDir string, values []string) (result, error) {
	var (
		addr    string
		pids    []int
		cleanup func()
		err     error
	)
	switch t {
	case "noop":
		addr, pids, cleanup, err = startNoop(ctx)
	case "ratedb":
		addr, pids, cleanup, err = startRatedb(ctx, o, tmp, cfgDir)
	case "envoy-ratelimit":
		addr, pids, cleanup, err = startEnvoyRatelimit(ctx, tmp)
	default:
		err = fmt.Errorf("unknown target %q", t)
	}
	if err != nil {
		return result{}, err
	}
	defer cleanup()
	fmt.Fprintf(os.Stderr, "%s: serving on %s, warm-up %v\n", t, addr, o.warmup)
	return measure(ctx, o, t, addr, pids, values)
}

func (r result) rate() float64 { return float64(r.calls) / r.elapsed.Seconds() }

func (r result) cpuPer1k() float64 {
	if r.calls == 0 {
		return 0
	}
	return float64(r.cpu.Microseconds()) / 1000 / float64(r.calls) * 1000
}

// measure warms up, then runs the load for o.duration; it stops, with
// ctx's error, once ctx ends. Every answer of a target other than noop must
// name the limit that counted the call (see limited), or the measurement
// fails.
func measure(ctx context.Context, o options, target, addr string, pids []int, values []string) (result, error) {
	conns := make([]*grpc.ClientConn, o.conns)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		conns[i] = c
	}
	// One checked call: the target answers and counts.
	c := rlsv3.NewRateLimitServiceClient(conns[0])
	resp, err := c.ShouldRateLimit(ctx, request("check"))
	if err != nil {
		return result{}, fmt.Errorf("first call: %w", err)
	}
	if target != "noop" && !limited(resp) {
		return result{}, fmt.Errorf("first call matched no limit: %v", resp)
	}

	var phase atomic.Int32 // 0 warm-up, 1 measuring, 2 done
	var calls, errs, overs, unlimited atomic.Int64
	lat := make([][]time.Duration, o.workers)
	var wg sync.WaitGroup
	for w := range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := rlsv3.NewRateLimitServiceClient(conns[w%len(conns)])
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			reqs := make([]*rlsv3.RateLimitRequest, 64)
			for i := range reqs {
				reqs[i] = request(values[rng.IntN(len(values))])
			}
			local := make([]time.Duration, 0, 1<<16)
			for i := 0; ; i++ {
				p := phase.Load()
				if p == 2 {
					break
				}
				req := reqs[i%len(reqs)]
				req.Descriptors[0].Entries[0].Value = values[rng.IntN(len(values))]
				t0 := time.Now()
				resp, err := client.ShouldRateLimit(ctx, req)
				d := time.Since(t0)
				if p != 1 {
					continue
				}
				calls.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
				case resp.GetOverallCode() != rlsv3.RateLimitResponse_OK:
					overs.Add(1)
				case target != "noop" && !limited(resp):
					unlimited.Add(1)
				}
				local = append(local, d)
			}
			lat[w] = local
		}()
	}
	if err := cmdsig.Sleep(ctx, o.warmup); err != nil {
		phase.Store(2)
		wg.Wait()
		return result{}, err
	}
	cpu0, err := cpuOf(pids)
	if err != nil {
		phase.Store(2)
		wg.Wait()
		return result{}, err
	}
	t0 := time.Now()
	phase.Store(1)
	if err := cmdsig.Sleep(ctx, o.duration); err != nil {
		phase.Store(2)
		wg.Wait()
		return result{}, err
	}
	phase.Store(2)
	elapsed := time.Since(t0)
	cpu1, err := cpuOf(pids)
	wg.Wait()
	if err != nil {
		return result{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r := result{target: target, calls: calls.Load(), errors: errs.Load(), overs: overs.Load(), elapsed: elapsed, cpu: cpu1 - cpu0}
	if len(all) > 0 {
		r.p50, r.p99 = all[len(all)/2], all[len(all)*99/100]
	}
	if r.errors > 0 {
		return r, fmt.Errorf("%d of %d calls failed", r.errors, r.calls)
	}
	if n := unlimited.Load(); n > 0 {
		return r, fmt.Errorf("%d of %d calls were answered OK without a limit: no rule counted them", n, r.calls)
	}
	return r, nil
}

// limited reports whether resp, the answer to request's one descriptor,
// names the limit that counted it. A descriptor that matches no rule is
// answered OK without one, and without counting: such a call measured no
// limiter, only the protocol.
func limited(resp *rlsv3.RateLimitResponse) bool {
	st := resp.GetStatuses()
	return len(st) == 1 && st[0].GetCurrentLimit() != nil
}

func request(value string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{
		Domain: "bench",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: value}},
		}},
		HitsAddend: 1,
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// waitServing polls addr until a ShouldRateLimit call answers (or 2 min,
// or ctx ends).
func waitServing(ctx context.Context, addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = rlsv3.NewRateLimitServiceClient(c).ShouldRateLimit(cctx, request("probe"))
			cancel()
			c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("the process exited before serving")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not serving: %w", addr, err)
		}
		if err := cmdsig.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// startProcess starts cmd (made by cmdsig.Command, so that it gets SIGTERM
// when the run's context ends) and returns a channel closed when it exits
// and a function that kills it and waits.
func startProcess(cmd *exec.Cmd) (<-chan struct{}, func(), error) {
	return startProcessTo(cmd, os.Stderr)
}

// startProcessTo is startProcess with the process's output sent to out.
func startProcessTo(cmd *exec.Cmd, out *os.File) (<-chan struct{}, func(), error) {
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return exited, func() {
		_ = cmd.Process.Kill()
		<-exited
	}, nil
}

func machine() string {
	model := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs, %s, %s/%s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH)
}
