// Command httpload measures `ratedb serve`'s POST /v1/check over HTTP on
// loopback, in one run and on the same machine, against a do-nothing net/http
// server answering the same request (the ceiling of the machine while this
// generator shares it) and envoyproxy/ratelimit's HTTP /json endpoint with a
// local redis-server.
//
// Run it from the bench directory (it builds ratedb from this checkout and
// envoyproxy/ratelimit from the Go module proxy into a temporary GOBIN):
//
//	go run ./cmd/httpload                       # 3 rounds; in each, every target: 5 s warm-up, then 30 s
//	go run ./cmd/httpload -rounds 1 -duration 5s -targets ratedb,noop
//	go run ./cmd/httpload -targets ratedb -cpuprofile /tmp/ratedb.pprof
//
// Load: -conns keep-alive connections (64), each driven by one goroutine
// sending the next request when the previous answer arrives; -clients
// distinct client ids (10,000) over -routes routes (20), picked uniformly by
// a seeded generator. Reported per target: calls/s, p50 and p99 latency, and
// the service's CPU time per 1,000 calls (utime+stime of its processes from
// /proc/<pid>/stat, Redis included for envoyproxy/ratelimit): the median of
// each over -rounds rounds, in which the targets take turns, with the range
// of calls/s.
//
// Bad flag values exit 2 before anything is built or started; a target
// that fails to start or be measured, or any measured call that fails,
// exits 1, after the services are stopped and the temporary directory
// removed (the table is printed with its errors column, and -out is then
// not written). SIGINT or SIGTERM stops the run the same way, and it then
// exits 130 or 143.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratedb/ratedb/bench/internal/cmdflag"
	"github.com/ratedb/ratedb/bench/internal/cmdsig"
)

// ratelimitVersion is the envoyproxy/ratelimit build measured (it has no
// tagged module versions).
const ratelimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"

type options struct {
	duration, warmup time.Duration
	conns, rounds    int
	clients, routes  int
	targets          string
	out              string
	cpuprofile       string
	gobin            string
}

func main() { os.Exit(command(os.Args[1:])) }

// targetNames are the targets -targets may name.
var targetNames = []string{"ratedb", "noop", "envoy-ratelimit"}

// command is the command with its arguments. It returns the exit status
// once its deferred clean-up (the services stopped, the temporary directory
// removed) has run: 0 after a full run (and after -h), 2 for bad flags,
// checked before anything is built or started, and 1 when a target fails to
// start or be measured, a measured call fails (the table is printed, -out is
// not written) or the -out file cannot be written, and 130 or 143 after
// SIGINT or SIGTERM, which stop the run.
func command(args []string) (code int) {
	var o options
	fs := flag.NewFlagSet("httpload", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "measured time per target (above 0)")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "unmeasured warm-up per target")
	fs.IntVar(&o.conns, "conns", 64, "concurrent keep-alive connections (at least 1)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each target is measured once per round and the medians are reported (at least 1)")
	fs.IntVar(&o.clients, "clients", 10_000, "distinct client ids (at least 1)")
	fs.IntVar(&o.routes, "routes", 20, "distinct routes (at least 1)")
	fs.StringVar(&o.targets, "targets", "ratedb,noop,envoy-ratelimit", "comma list of targets, each once: ratedb, noop, envoy-ratelimit")
	fs.StringVar(&o.out, "out", "", "also write the Markdown table to this file")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of ratedb serve (the last round's warm-up and measured run) to this file")
	fs.StringVar(&o.gobin, "gobin", filepath.Join(os.TempDir(), "ratedb-bench-gobin"), "where envoyproxy/ratelimit is installed (reused when present)")
	noop := fs.String("serve-noop", "", "internal: serve the do-nothing server on this address")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2 // fs printed the error and the usage
	}
	log.SetFlags(log.Ltime)
	if *noop != "" {
		log.Printf("httpload: %v", serveNoop(*noop))
		return 1
	}
	if err := checkFlags(fs.Args(), o); err != nil {
		log.Printf("httpload: %v", err)
		return 2
	}
	ctx, stop := cmdsig.Context()
	defer stop()
	defer func() { code = cmdsig.Status(ctx, "httpload", code) }() // after run's clean-up
	if err := run(ctx, o, startTarget); err != nil {
		log.Printf("httpload: %v", err)
		return 1
	}
	return 0
}

// checkFlags returns an error naming the first bad value among the
// command's flags, before anything is built or started: arguments after the
// flags, fewer than one connection, round, client id or route, a measured
// time that is not positive, a target not in targetNames or one named
// twice. (-clients 0 and -routes 0 used to panic in a connection's
// goroutine once a target was serving, which ended the process with the
// service still running and the temporary directories left behind;
// -rounds 0 panicked after the run, -conns 0 measured nothing and exited 0,
// and an unknown target was found only when its turn came.)
func checkFlags(extra []string, o options) error {
	if err := cmdflag.NoArgs(extra); err != nil {
		return err
	}
	switch {
	case o.conns < 1:
		return errors.New("-conns must be at least 1")
	case o.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case o.clients < 1:
		return errors.New("-clients must be at least 1")
	case o.routes < 1:
		return errors.New("-routes must be at least 1")
	case o.duration <= 0:
		return errors.New("-duration must be above 0")
	}
	return cmdflag.Names("targets", o.targets, targetNames)
}

// result is one target's measurement.
type result struct {
	name          string
	calls, errors int64
	elapsed       time.Duration
	p50, p99      time.Duration
	cpu           time.Duration
	note          string
}

// startTarget starts the target named name (one of targetNames), with
// dir for its files; its processes get SIGTERM when ctx ends.
func startTarget(ctx context.Context, name, dir string, o options) (*target, error) {
	switch name {
	case "ratedb":
		return startRatedb(ctx, dir, o)
	case "noop":
		return startNoop(ctx)
	case "envoy-ratelimit":
		return startEnvoyRatelimit(ctx, dir, o)
	}
	return nil, fmt.Errorf("unknown target %q", name)
}

// run measures the targets of o, each started by start, prints the table
// and writes it to o.out. It returns an error when a target fails to start
// or be measured, and when any measured call failed (a transport error, or
// an answer the target's ok refuses): the table, printed with its errors
// column, is then not written to o.out. Once ctx ends, it stops (the
// target in turn stopped) and returns an error.
func run(ctx context.Context, o options, start func(ctx context.Context, name, dir string, o options) (*target, error)) error {
	dir, err := os.MkdirTemp("", "httpload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	targets := strings.Split(o.targets, ",")
	runs := make(map[string][]result)
	for round := 1; round <= o.rounds; round++ {
		// Targets take turns in every round, so that load from other
		// processes on the machine falls on all of them alike.
		for _, t := range targets {
			tg, err := start(ctx, t, dir, o)
			if err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
			log.Printf("round %d/%d, %s: warm-up %v, then %v with %d connections", round, o.rounds, t, o.warmup, o.duration, o.conns)
			r, err := measure(ctx, tg, o)
			tg.stop()
			if err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
			r.name = t
			runs[t] = append(runs[t], r)
			log.Printf("%s: %.0f calls/s, p50 %v, p99 %v, %.1f ms CPU per 1,000 calls, %d errors",
				t, r.rate(), r.p50, r.p99, r.cpuPer1000(), r.errors)
		}
	}
	var results []summary
	var failed int64
	for _, t := range targets {
		s := summarize(runs[t])
		results = append(results, s)
		failed += s.errors
	}
	table := render(results, o)
	fmt.Print(table)
	if failed > 0 {
		msg := fmt.Sprintf("%d measured calls failed (the errors column; each target's first is logged above): the figures are not valid", failed)
		if o.out != "" {
			msg += ", so " + o.out + " was not written"
		}
		return errors.New(msg)
	}
	if o.out != "" {
		return os.WriteFile(o.out, []byte(table), 0o644)
	}
	return nil
}

func (r result) rate() float64 { return float64(r.calls) / r.elapsed.Seconds() }

func (r result) cpuPer1000() float64 {
	if r.calls == 0 {
		return 0
	}
	return float64(r.cpu.Milliseconds()) * 1000 / float64(r.calls)
}

// summary is the median of each figure over a target's rounds.
type summary struct {
	name                   string
	rate, minRate, maxRate float64
	p50, p99               time.Duration
	cpuPer1000             float64
	errors                 int64
}

func summarize(rs []result) summary {
	s := summary{name: rs[0].name}
	var rates, cpus []float64
	var p50s, p99s []time.Duration
	for _, r := range rs {
		rates, cpus = append(rates, r.rate()), append(cpus, r.cpuPer1000())
		p50s, p99s = append(p50s, r.p50), append(p99s, r.p99)
		s.errors += r.errors
	}
	slices.Sort(rates)
	slices.Sort(cpus)
	slices.Sort(p50s)
	slices.Sort(p99s)
	m := len(rs) / 2
	s.rate, s.minRate, s.maxRate = rates[m], rates[0], rates[len(rates)-1]
	s.cpuPer1000, s.p50, s.p99 = cpus[m], p50s[m], p99s[m]
	return s
}

func render(rs []summary, o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| target | calls/s (min-max) | p50 | p99 | service CPU per 1,000 calls | errors |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %.0f (%.0f-%.0f) | %.2f ms | %.2f ms | %.0f ms | %d |\n", r.name, r.rate, r.minRate, r.maxRate,
			float64(r.p50.Microseconds())/1000, float64(r.p99.Microseconds())/1000, r.cpuPer1000, r.errors)
	}
	fmt.Fprintf(&b, "\nMedians of %d rounds (targets take turns in each round); %d keep-alive connections, %d client ids x %d routes, "+
		"%v warm-up, %v measured per target and round, loopback, generator on the same machine.\n",
		o.rounds, o.conns, o.clients, o.routes, o.warmup, o.duration)
	return b.String()
}

// target is a running service to load.
type target struct {
	url    string
	header http.Header // shared by every request: never modified
	pids   []int       // processes whose CPU is the service's
	body   func(client, route string) []byte
	ok     func(status int, body []byte) bool
	stop   func()
}

// measure loads t for the warm-up and then the measured time; it stops,
// with ctx's error, once ctx ends.
func measure(ctx context.Context, t *target, o options) (result, error) {
	clients := make([]string, o.clients)
	for i := range clients {
		clients[i] = fmt.Sprintf("client-%05d", i)
	}
	routes := make([]string, o.routes)
	for i := range routes {
		routes[i] = fmt.Sprintf("/api/v1/resource-%02d", i)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: o.conns, MaxConnsPerHost: o.conns, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	var measuring atomic.Bool
	var stopAll atomic.Bool
	var calls, errs atomic.Int64
	lat := make([][]time.Duration, o.conns)
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	for w := range o.conns {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			buf := make([]time.Duration, 0, 1<<16)
			for !stopAll.Load() {
				body := t.body(clients[rng.IntN(len(clients))], routes[rng.IntN(len(routes))])
				start := time.Now()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
				if err != nil {
					panic(err) // a constant URL
				}
				req.Header = t.header
				resp, err := hc.Do(req)
				var rb []byte
				if err == nil {
					rb, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				d := time.Since(start)
				if !measuring.Load() {
					continue
				}
				if err != nil || !t.ok(resp.StatusCode, rb) {
					if errs.Add(1) == 1 {
						e := fmt.Errorf("first error: %v (status %v) %q", err, statusOf(resp), truncate(rb))
						firstErr.Store(&e)
					}
					continue
				}
				calls.Add(1)
				buf = append(buf, d)
			}
			lat[w] = buf
		})
	}
	if err := cmdsig.Sleep(ctx, o.warmup); err != nil {
		stopAll.Store(true)
		wg.Wait()
		return result{}, err
	}
	cpu0, err := cpuOf(t.pids)
	if err != nil {
		stopAll.Store(true)
		wg.Wait()
		return result{}, err
	}
	measuring.Store(true)
	start := time.Now()
	if err := cmdsig.Sleep(ctx, o.duration); err != nil {
		measuring.Store(false)
		stopAll.Store(true)
		wg.Wait()
		return result{}, err
	}
	measuring.Store(false)
	elapsed := time.Since(start)
	cpu1, err := cpuOf(t.pids)
	stopAll.Store(true)
	wg.Wait()
	if err != nil {
		return result{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r := result{calls: calls.Load(), errors: errs.Load(), elapsed: elapsed, cpu: cpu1 - cpu0}
	if len(all) > 0 {
		r.p50, r.p99 = percentile(all, 0.50), percentile(all, 0.99)
	}
	if p := firstErr.Load(); p != nil {
		log.Printf("%v", *p)
	}
	return r, nil
}

func statusOf(r *http.Response) any {
	if r == nil {
		return "none"
	}
	return r.StatusCode
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200])
	}
	return string(b)
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// cpuOf sums utime+stime of the processes, from /proc/<pid>/stat.
func cpuOf(pids []int) (time.Duration, error) {
	const ticks = 100 // USER_HZ on Linux
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		// Fields after the command name, which is in parentheses.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 13 {
			return 0, fmt.Errorf("short /proc/%d/stat", pid)
		}
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return 0, err
		}
		total += time.Duration(ut+st) * time.Second / ticks
	}
	return total, nil
}

// freeAddr returns a free loopback address.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitHTTP polls url until it answers, the deadline passes, ctx ends or
// exited, the channel startProc returned for the process that should
// answer, is closed (then the error names bin, the process's program).
func waitHTTP(ctx context.Context, url, bin string, exited <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("%s exited", bin)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if err := cmdsig.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s did not answer in time", url)
}

// startProc starts a process with its output in dir/name.log; it gets
// SIGTERM when ctx ends (see cmdsig.Command). It returns the process, a
// channel closed once it has exited (read that, never cmd.ProcessState,
// which the goroutine waiting for the process writes), and a function that
// stops it (SIGINT, then a kill after 10 s) and waits.
func startProc(ctx context.Context, dir, name string, env []string, bin string, args ...string) (*exec.Cmd, <-chan struct{}, func(), error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := cmdsig.Command(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
	}
	return cmd, exited, stop, nil
}

// repoRoot is the directory holding go.work, above the working directory.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("go.work not found above the working directory: run from the repository")
		}
		d = p
	}
}

func goCmd(ctx context.Context, dir string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
