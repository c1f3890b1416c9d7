// Command redisbench measures ratedb/redisstore against redis_rate v10,
// ulule/limiter's Redis store and a bare EVALSHA (the round-trip floor),
// side by side in one run against one redis-server it starts on loopback:
// allowed hits per second, p50/p99 latency and Redis's time per script call
// (INFO commandstats, over the timed hits only) with 1 and 64 concurrent
// callers, on one hot key and on 100,000 keys. It prints a Markdown table
// and, with -out, writes it with the machine and command to a file.
// SIGINT or SIGTERM stops the run, the redis-server and removes its
// directory; it then exits 130 or 143.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/bench"
	"github.com/ratedb/ratedb/bench/internal/cmdflag"
	"github.com/ratedb/ratedb/bench/internal/cmdline"
	"github.com/ratedb/ratedb/bench/internal/cmdsig"
	"github.com/ratedb/ratedb/redisstore"
	"github.com/redis/go-redis/v9"
)

func main() { os.Exit(command(os.Args[1:])) }

// command is the command with its arguments. It returns the exit status
// once its deferred clean-up has run (the redis-server stopped, its
// temporary directory removed, on every path): 0 after a full run (and
// after -h), 2 for bad flags, 1 when redis-server does not start, a
// measurement fails or the -out file cannot be written, 130 or 143 after
// SIGINT or SIGTERM, which stop the run.
func command(args []string) (code int) {
	fs := flag.NewFlagSet("redisbench", flag.ContinueOnError)
	duration := fs.Duration("duration", 5*time.Second, "timed run of each row")
	nkeys := fs.Int("keys", 100_000, "size of the many-keys key set (at least 1)")
	out := fs.String("out", "", "write the report to this file (e.g. results/REDIS.md)")
	quick := fs.Bool("quick", false, "smoke run: 300 ms rows, 10,000 keys")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2 // fs printed the error and the usage
	}
	if *quick {
		*duration, *nkeys = 300*time.Millisecond, 10_000
	}
	if err := cmdflag.NoArgs(fs.Args()); err != nil {
		log.Printf("redisbench: %v", err)
		return 2
	}
	switch {
	case *nkeys < 1:
		log.Print("redisbench: -keys must be at least 1")
		return 2
	}
	ctx, stop := cmdsig.Context()
	defer stop()
	defer func() { code = cmdsig.Status(ctx, "redisbench", code) }() // after the clean-up below
	dir, err := os.MkdirTemp("", "redisbench-")
	if err != nil {
		log.Printf("redisbench: %v", err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := bench.StartRedis(dir)
	if err != nil {
		log.Printf("redisbench: %v", err)
		return 1
	}
	defer srv.Stop()
	log.Printf("redisbench: redis-server %s on %s", srv.Version(), srv.Addr)
	report, err := run(ctx, srv, *duration, *nkeys)
	if err != nil {
		log.Printf("redisbench: %v", err)
		return 1
	}
	head := header(args, srv.Version())
	fmt.Print(head + report)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(head+report), 0o644); err != nil {
			log.Printf("redisbench: %v", err)
			return 1
		}
	}
	return 0
}

// header returns the report's header: the command with args, its
// arguments, quoted for a shell (an empty or spaced -out value stays one
// argument), the machine, redis-server's version and the date.
func header(args []string, redisVersion string) string {
	return fmt.Sprintf("# Redis-backed limiters, one run\n\nCommand: `cd bench && %s`  \n"+
		"Machine: %s, %d CPUs, %s/%s; %s; redis-server %s (Debian), loopback, no persistence; load average at start %s  \n"+
		"Date: %s\n\n", cmdline.Join(append([]string{"go", "run", "./cmd/redisbench"}, args...)), cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH,
		runtime.Version(), redisVersion, loadAvg(), time.Now().UTC().Format(time.RFC3339))
}

// run measures every row against srv and returns the report; it stops,
// with an error, once ctx ends.
func run(ctx context.Context, srv *bench.RedisServer, d time.Duration, nkeys int) (string, error) {
	// PoolSize above the largest number of callers, so that no caller waits
	// for a connection.
	fast := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 128, ContextTimeoutEnabled: true})
	plain := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 128})
	clients := map[string]*redis.Client{"": fast, "plain": plain}
	for _, c := range clients {
		defer c.Close()
	}
	keySets := [][]string{{"hot"}, bench.Keys(nkeys)}
	var b strings.Builder
	b.WriteString("| limiter | callers | keys | allowed hits/s | p50 | p99 | bare EVALSHA's hits/s ÷ this | Redis CPU per script | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	floor := map[[2]int]float64{}
	var rows []bench.RedisRow
	for _, keys := range keySets {
		for _, callers := range []int{1, 64} {
			for _, f := range bench.RedisFactories {
				c := clients[f.Client]
				if err := fast.FlushAll(ctx).Err(); err != nil {
					return "", err
				}
				lim, err := f.New(c)
				if err != nil {
					return "", fmt.Errorf("%s: %w", f.Name, err)
				}
				r, err := measureRow(ctx, fast, lim, f.Name, callers, keys, d)
				if err != nil {
					return "", fmt.Errorf("%s: %w", f.Name, err)
				}
				rows = append(rows, r)
				if f.Name == "bare EVALSHA" {
					floor[[2]int{callers, len(keys)}] = r.PerSecond()
				}
				fmt.Fprintf(os.Stderr, "%-32s callers %2d keys %6d: %8.0f allowed/s p50 %v p99 %v script %.1f µs errors %d\n",
					f.Name, callers, len(keys), r.PerSecond(), r.P50, r.P99, r.ServerPerCall, r.Errors)
			}
		}
	}
	for _, r := range rows {
		ratio := "—"
		if fl := floor[[2]int{r.Callers, r.Keys}]; fl > 0 && r.Limiter != "bare EVALSHA" {
			ratio = fmt.Sprintf("%.2f", fl/r.PerSecond())
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %v | %v | %s | %.1f µs | %d |\n", r.Limiter, r.Callers, r.Keys, r.PerSecond(),
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), ratio, r.ServerPerCall, r.Errors)
	}
	perKey, perDedup, err := memoryPerKey(ctx, fast, bench.Keys(nkeys))
	if err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "\nRedis memory (used_memory): %.0f bytes per redisstore counter (%d keys, FixedWindow, dedup off); "+
		"a counted call's dedup key: %.0f bytes, kept for DedupWindow.\n", perKey, len(bench.Keys(nkeys)), perDedup)
	b.WriteString("\nEvery timed hit is allowed (quota 2^40 per 24 h); a row counts a hit only when the limiter said allowed. " +
		"Before the timed hits, one untimed pass hits every key once; Redis CPU per script is INFO commandstats' usec per call of EVAL and EVALSHA over the timed hits only.\n\n")
	for _, f := range bench.RedisFactories {
		fmt.Fprintf(&b, "- **%s**: %s\n", f.Name, f.Desc)
	}
	return b.String(), nil
}

// memoryPerKey measures Redis's used_memory per redisstore counter, hitting
// every key once with deduplication off, and then per dedup key, hitting
// them again with it on.
func memoryPerKey(ctx context.Context, c *redis.Client, keys []string) (float64, float64, error) {
	used := func() (float64, error) {
		info, err := c.InfoMap(ctx, "memory").Result()
		if err != nil {
			return 0, err
		}
		return strconv.ParseFloat(info["Memory"]["used_memory"], 64)
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		return 0, 0, err
	}
	var marks [3]float64
	for i, dedup := range []time.Duration{0, time.Hour} {
		m, err := used()
		if err != nil {
			return 0, 0, err
		}
		marks[i] = m
		s, err := redisstore.New(c, &redisstore.Options{DedupWindow: dedup, Timeout: time.Second})
		if err != nil {
			return 0, 0, err
		}
		w, err := s.Window(ratedb.FixedWindow, bench.DefaultWindow)
		if err != nil {
			return 0, 0, err
		}
		for _, k := range keys {
			if _, err := w.Hit(ctx, k, bench.AllowAll, 1); err != nil {
				return 0, 0, err
			}
		}
	}
	m, err := used()
	if err != nil {
		return 0, 0, err
	}
	marks[2] = m
	n := float64(len(keys))
	return (marks[1] - marks[0]) / n, (marks[2] - marks[1]) / n, nil
}

// measureRow runs bench.RunRedis and fills the row's ServerPerCall from
// INFO commandstats of stats (a client of the same server), reset once the
// untimed pass over every key is done, so that the figure covers the timed
// hits only.
func measureRow(ctx context.Context, stats *redis.Client, lim bench.RedisLimiter, name string, callers int, keys []string, d time.Duration) (bench.RedisRow, error) {
	r, err := bench.RunRedis(ctx, lim, name, callers, keys, d, func() error { return stats.ConfigResetStat(ctx).Err() })
	if err != nil {
		return r, err
	}
	calls, usec, err := scriptStats(ctx, stats)
	if err != nil {
		return r, err
	}
	if calls > 0 {
		r.ServerPerCall = usec / calls
	}
	return r, nil
}

// scriptStats returns the calls of EVAL and EVALSHA since the last CONFIG
// RESETSTAT and the microseconds the server spent in them (INFO
// commandstats).
func scriptStats(ctx context.Context, c *redis.Client) (calls, usec float64, err error) {
	info, err := c.InfoMap(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	for name, v := range info["Commandstats"] {
		if name != "cmdstat_evalsha" && name != "cmdstat_eval" {
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(val, 64)
			switch k {
			case "calls":
				calls += f
			case "usec":
				usec += f
			}
		}
	}
	return calls, usec, nil
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "model name") {
			if _, v, ok := strings.Cut(line, ":"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown CPU"
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
