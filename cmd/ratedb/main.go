// Command ratedb is a rate-limit service with an HTTP JSON API, API keys,
// per-client and per-route rules managed at runtime, Prometheus metrics and
// tools for its state file. Its state lives in an embedded ratedb file, so
// quotas survive restarts.
//
//	ratedb serve [flags]
//	ratedb inspect [--prefix P | --envoy-domain NAME [--envoy-entry KEY=VALUE]...] [--json] FILE
//	ratedb compact FILE
//	ratedb version
//
// main only parses subcommands and flags and wires the packages under
// internal/.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/serve"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/tools"
)

const usage = `ratedb: a rate-limit service whose quotas survive restarts

usage:
  ratedb serve [flags]                       run the service (ratedb serve -h for its flags)
  ratedb inspect [flags] FILE                list the windows of a state file, read-only (ratedb inspect -h for its flags)
  ratedb compact FILE                        rewrite a state file to reclaim space (refuses while in use)
  ratedb version                             print the version
`

func main() {
	// RATEDB_CPUPROFILE=FILE writes a CPU profile of the whole run, for
	// the benchmark in bench/cmd/httpload. A profile that cannot be
	// written ends the run at once: a benchmark run without the profile it
	// asked for is wasted.
	if p := os.Getenv("RATEDB_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "ratedb: RATEDB_CPUPROFILE: %v\n", err)
			os.Exit(1)
		}
		code := run(os.Args[1:], os.Stdout, os.Stderr)
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "ratedb: RATEDB_CPUPROFILE: %v\n", err)
			code = max(code, 1)
		}
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = runServe(args[1:], stderr)
	case "inspect":
		err = runInspect(args[1:], stdout, stderr)
	case "compact":
		err = runCompact(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "ratedb version: unexpected argument %s\nusage: ratedb version\n", shownArg(args[1]))
			return 2
		}
		if _, err := fmt.Fprintln(stdout, version()); err != nil {
			fmt.Fprintf(stderr, "ratedb version: %v\n", err)
			return 1
		}
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "ratedb: unknown command %s\n\n%s", shownArg(args[0]), usage)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case err != nil:
		msg := err.Error()
		if args[0] == "serve" {
			msg = withoutAtWords(msg, args[1:])
		}
		fmt.Fprintf(stderr, "ratedb %s: %s\n", args[0], msg)
		return 1
	}
	return 0
}

// atWord is a word of an error message that holds '@'.
var atWord = regexp.MustCompile(`[^\s]*@[^\s]*`)

// withoutAtWords returns msg, the error that ended `ratedb serve args`,
// with every word holding '@' replaced when an argument holds '@': a value
// refused after parsing comes back in its error, a Redis URL with its
// password given to the wrong flag ("--db redis://u:pw@h", "--http u:pw@h")
// included, and not always as it was given (a path cleaned, an address
// quoted), so the words are replaced rather than the value. serve's stderr
// is the service's log.
func withoutAtWords(msg string, args []string) string {
	for _, a := range args {
		if strings.Contains(a, "@") {
			return atWord.ReplaceAllStringFunc(msg, func(w string) string {
				// The ':' that ends a wrapped error's value stays.
				if strings.HasSuffix(w, ":") {
					return "(a value not shown: it holds '@', as a password in a URL would):"
				}
				return "(a value not shown: it holds '@', as a password in a URL would)"
			})
		}
	}
	return msg
}

var errUsage = errors.New("usage")

// parseQuietly parses args with fs and reports a bad flag on stderr as
// flag.FlagSet would, except that a value holding '@' (a URL with a
// password, given to the wrong flag: "--fail-open=redis://u:pw@h") is not
// quoted: usage errors go to stderr, the service's log. It returns
// flag.ErrHelp for -h and errUsage for an error.
func parseQuietly(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(io.Discard) // FlagSet would print the error, value and all
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	fmt.Fprintln(stderr, withoutAt(err.Error(), args))
	fs.Usage()
	return errUsage
}

// withoutAt returns flag's error message msg about args with no argument
// holding '@' in it. flag quotes a bad value (%q, escapes and all): that
// quoted value is replaced. Other errors name the argument itself,
// unquoted ("bad flag syntax: ---redis=redis://u:pw@h", "flag provided but
// not defined: -redis:redis://u:pw@h"): a message still holding '@' after
// the replacement is replaced whole.
func withoutAt(msg string, args []string) string {
	for _, a := range args {
		if !strings.Contains(a, "@") {
			continue
		}
		// The argument as a flag's value, or the part after an '='.
		vs := []string{a}
		for i := 0; i < len(a); i++ {
			if a[i] == '=' {
				vs = append(vs, a[i+1:])
			}
		}
		for _, v := range vs {
			msg = strings.ReplaceAll(msg, strconv.Quote(v), "\x00")
		}
	}
	if strings.Contains(msg, "@") {
		return "bad flag or flag value (not shown: it holds '@', as a password in a URL would)"
	}
	return strings.ReplaceAll(msg, "\x00", "(a value not shown: it holds '@', as a password in a URL would)")
}

// shownArg quotes a stray argument for a usage error, unless it may hold a
// password ("redis://user:password@host", or the same without the scheme):
// usage errors go to stderr, the service's log.
func shownArg(a string) string {
	if strings.Contains(a, "@") {
		return "(not shown: it holds '@', as a password in a URL would)"
	}
	return strconv.Quote(a)
}

func runServe(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serve.Config
	fs.StringVar(&c.HTTP, "http", "127.0.0.1:8080", "`ADDR` of the JSON API, admin API, /metrics, /healthz and /readyz")
	fs.StringVar(&c.DB, "db", "./ratedb.db", "embedded state `PATH` (rules are kept beside it in PATH.rules.json); not with --redis")
	fs.StringVar(&c.Redis, "redis", "", "keep state in Redis instead: `URL` redis://host:port/db, or a Cluster as a comma list of addresses (counts and rules shared by every instance); not with --db")
	fs.StringVar(&c.APIKeysFile, "api-keys-file", "", "client API keys `PATH`, one per line (a regular file, at most 16 MiB); or env RATEDB_API_KEYS (comma-separated), not both; a file, or a variable that is not empty, must hold a key. With no key at all (client or admin), a development client key is generated and printed once; with admin keys only, only they may check")
	fs.StringVar(&c.AdminKeysFile, "admin-keys-file", "", "admin API keys `PATH`, same format; or env RATEDB_ADMIN_KEYS, not both. Admin keys manage rules and may also check")
	fs.Int64Var(&c.DefaultLimit, "default-limit", 100, "limit `N` of the default rule (applies when no rule matches)")
	fs.DurationVar(&c.DefaultWindow, "default-window", 60*time.Second, "window `DURATION` of the default rule")
	fs.StringVar(&c.DefaultAlgorithm, "default-algorithm", "fixed", "algorithm of the default rule: fixed|per_key|staggered")
	fs.StringVar(&c.Rules, "rules", "", "YAML or JSON rules file `PATH` (a regular file, at most 16 MiB) imported at start (replacing stored rules of the same name)")
	fs.IntVar(&c.DenyStatus, "deny-status", 200, "HTTP status of a Deny decision: 200 (as the reference service) or 429")
	fs.BoolVar(&c.FailOpen, "fail-open", false, "with --redis: allow when the store is unavailable (default: answer 503)")
	fs.DurationVar(&c.RedisTimeout, "redis-timeout", redisstate.Timeout, "with --redis: bound on each check's Redis call; past it the check answers 503 (or Allow with --fail-open). /readyz's probe and the start's read of maxmemory-policy get it too; rule reads and changes get ten times it, at least 1s. At most 1h")
	fs.StringVar(&c.LogFormat, "log-format", "text", "log format: text or json, in any case")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error, in any case")
	fs.BoolVar(&c.LogKeys, "log-keys", false, "allow client ids and routes in debug logs; needs --log-level debug (API keys are never logged)")
	fs.DurationVar(&c.SnapshotPeriod, "snapshot-period", time.Second, "how often changed windows are written to the state file: what a crash can lose (not with --redis)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight requests may finish after SIGTERM/SIGINT")
	fs.StringVar(&c.Envoy.GRPC, "grpc", "", "serve Envoy's rate limit protocol (envoy.service.ratelimit.v3) and grpc.health.v1 on `ADDR`; no API keys apply: use mTLS or a private network")
	fs.StringVar(&c.Envoy.Config, "envoy-config", "", "envoyproxy/ratelimit YAML config: a file or a directory (`PATH`; every file below it, as envoyproxy/ratelimit loads its config directory); reloaded on SIGHUP and when its files change")
	fs.BoolVar(&c.Envoy.IgnoreDotFiles, "envoy-config-ignore-dotfiles", false, "skip files and directories of --envoy-config whose names start with a dot, as envoyproxy/ratelimit's RUNTIME_IGNOREDOTFILES=true (set it for a Kubernetes ConfigMap volume)")
	fs.BoolVar(&c.Envoy.MergeDomains, "envoy-config-merge-domains", false, "merge the descriptors of a domain declared in several files of --envoy-config instead of refusing it, as envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG=true")
	fs.DurationVar(&c.Envoy.Poll, "envoy-config-poll", 2*time.Second, "how often --envoy-config's files are checked for changes; a change is loaded once two checks in a row see it (0: only on SIGHUP)")
	fs.BoolVar(&c.Envoy.ShadowMode, "envoy-shadow-mode", false, "answer every Envoy request OK overall, whatever its limits decide (statuses and counting unchanged), as envoyproxy/ratelimit's SHADOW_MODE=true")
	fs.BoolVar(&c.Envoy.QuotaMode, "envoy-quota-mode", false, "treat every Envoy limit as quota_mode, as envoyproxy/ratelimit's QUOTA_MODE=true")
	fs.BoolVar(&c.Envoy.Independent, "envoy-independent", false, "count each descriptor of a request on its own, as envoyproxy/ratelimit does (default: all-or-nothing)")
	fs.StringVar(&c.Envoy.TLSCert, "grpc-tls-cert", "", "TLS certificate `PATH` (PEM, a regular file, at most 16 MiB) of the gRPC server; with --grpc-tls-key")
	fs.StringVar(&c.Envoy.TLSKey, "grpc-tls-key", "", "TLS private key `PATH` (PEM, a regular file, at most 16 MiB) of the gRPC server; with --grpc-tls-cert")
	fs.UintVar(&c.Envoy.MaxStreams, "grpc-max-concurrent-streams", grpcapi.DefaultMaxConcurrentStreams, "most gRPC calls (health Watch streams included) one client connection may have open at once, advertised to the client; calls past it wait for a free stream (Envoy opens another connection). As envoyproxy/ratelimit's GRPC_MAX_CONCURRENT_STREAMS, but bounded by default")
	fs.StringVar(&c.Envoy.TLSClientCA, "grpc-client-ca", "", "CA `PATH` (PEM, a regular file, at most 16 MiB): require gRPC clients to present a certificate it signed (mTLS; needs --grpc-tls-cert and --grpc-tls-key)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ratedb serve [flags]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseQuietly(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ratedb serve: unexpected argument %s\n", shownArg(fs.Arg(0)))
		return errUsage
	}
	c.Given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.Given[f.Name] = true })
	c.APIKeysEnv = os.Getenv("RATEDB_API_KEYS")
	c.AdminKeysEnv = os.Getenv("RATEDB_ADMIN_KEYS")

	// A write to a broken stderr (journald restarted, a log shipper gone)
	// must fail, not end the service: Go's runtime ends a program that
	// writes to a broken fd 1 or 2 with SIGPIPE unless SIGPIPE is handled
	// (systemd's IgnoreSIGPIPE does not prevent it), and the line logged
	// before the final snapshot would then lose every count since the last
	// one.
	signal.Ignore(syscall.SIGPIPE)
	// The signal handlers log as the service does (--log-format).
	log := serve.NewLogger(&c, stderr)
	// The first SIGTERM/SIGINT stops the service gracefully; a second one
	// exits at once.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	stop := make(chan struct{})
	go func() {
		<-sig
		close(stop)
		<-sig
		log.Warn("second signal: exiting at once, without the final snapshot")
		os.Exit(1)
	}()
	// SIGHUP reloads the Envoy config. Without --envoy-config there is
	// nothing to reload, and it is ignored: its default action would end
	// the process without the final snapshot (a reload sent to every
	// instance must not lose counts on some).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			if c.Envoy.Config == "" {
				log.Info("SIGHUP: nothing to reload (no --envoy-config); ignored")
				continue
			}
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()
	if c.Envoy.Config != "" {
		c.Envoy.Reload = reload
	}
	return serve.Run(c, stderr, stop)
}

func runInspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	prefix := fs.String("prefix", "", "list only windows whose key starts with `P`")
	domain := fs.String("envoy-domain", "", "list only the windows the gRPC API counted for the Envoy domain `NAME` (their keys start with a NUL byte and hold lengths in binary, which --prefix cannot take)")
	var entries [][2]string
	badEntry := false
	fs.Func("envoy-entry", "with --envoy-domain, list only the descriptors whose first entry is `KEY=VALUE` (the first '=' ends KEY); repeat it for the next entries, in order", func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		// Refused after parsing: an error here would quote the value,
		// which may be a client's (an IP address, a user id).
		badEntry = badEntry || !ok
		entries = append(entries, [2]string{k, v})
		return nil
	})
	asJSON := fs.Bool("json", false, "write JSON instead of text")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ratedb inspect [--prefix P | --envoy-domain NAME [--envoy-entry KEY=VALUE]...] [--json] FILE\n\n")
		fs.PrintDefaults()
	}
	if err := parseQuietly(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fmt.Fprintf(stderr, "ratedb inspect: %s\n", fileArgProblem(fs.Args()))
		fs.Usage()
		return errUsage
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var bad string
	switch {
	case given["envoy-domain"] && given["prefix"]:
		bad = "--prefix and --envoy-domain exclude each other"
	case given["envoy-entry"] && !given["envoy-domain"]:
		bad = "--envoy-entry needs --envoy-domain"
	case given["envoy-domain"] && *domain == "":
		bad = "--envoy-domain needs a name (every Envoy request names its domain)"
	case badEntry:
		bad = "--envoy-entry takes KEY=VALUE (the first '=' ends KEY)"
	}
	if bad != "" {
		fmt.Fprintf(stderr, "ratedb inspect: %s\n", bad)
		fs.Usage()
		return errUsage
	}
	p := *prefix
	if given["envoy-domain"] {
		p = grpcapi.KeyPrefix(*domain, entries...)
	}
	l, err := tools.List(fs.Arg(0), p, time.Now())
	if err != nil {
		return err
	}
	write := tools.WriteText
	if *asJSON {
		write = tools.WriteJSON
	}
	err = write(stdout, l)
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	return err
}

func runCompact(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ratedb compact FILE\n\nremoves the expired windows of FILE and rewrites it to reclaim space (refuses while it is in use).\n"+
			"A FILE with damaged pages is rebuilt from its sound blocks of windows first, as serve would, and the damaged\n"+
			"file kept beside it as FILE.corrupt-<unix-ms> (compact names it; it never removes it: remove it once it is of no use)\n")
	}
	if err := parseQuietly(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fmt.Fprintf(stderr, "ratedb compact: %s\n", fileArgProblem(fs.Args()))
		fs.Usage()
		return errUsage
	}
	args = fs.Args()
	res, err := tools.Compact(args[0])
	if err != nil {
		if res.Cleaned > 0 || res.Damaged > 0 {
			// The janitor pass changed the file in place before the
			// rewrite failed.
			fmt.Fprintf(stderr, "ratedb compact: before the error, the janitor pass removed %d expired windows and dropped %d damaged blocks from %s in place\n",
				res.Cleaned, res.Damaged, args[0])
		}
		keptAs(stderr, res)
		return err
	}
	if res.Damaged > 0 {
		lost := "an unknown number of windows (the file's window count was unreadable)"
		if res.Lost >= 0 {
			lost = fmt.Sprintf("%d windows", res.Lost)
		}
		fmt.Fprintf(stderr, "ratedb compact: warning: %s was damaged: %d damaged blocks were dropped, and with them %s; their counts are lost (they were unreadable: serve would have counted them anew)\n",
			args[0], res.Damaged, lost)
	}
	keptAs(stderr, res)
	if _, err := fmt.Fprintf(stdout, "compacted %s: removed %d expired windows, dropped %d damaged blocks, %d -> %d bytes\n",
		args[0], res.Cleaned, res.Damaged, res.Before, res.After); err != nil {
		// A script reading the summary must not take its absence for
		// success; the file itself was compacted.
		return fmt.Errorf("%s was compacted, but its summary could not be written: %w", args[0], err)
	}
	return nil
}

// keptAs says on stderr where ratedb kept the damaged file when compact's
// open rebuilt it (res.KeptAs), if it did.
func keptAs(stderr io.Writer, res tools.CompactResult) {
	if res.KeptAs != "" {
		fmt.Fprintf(stderr, "ratedb compact: the damaged file was kept as %s (ratedb rebuilt the file around its damaged pages); the compacted file does not need it: remove it once it is of no use\n", res.KeptAs)
	}
}

// fileArgProblem says what is wrong with args, the arguments left after
// the flags of a command that takes one FILE. They are not shown: a
// --prefix value given after FILE is a client's key.
func fileArgProblem(args []string) string {
	switch {
	case len(args) == 0:
		return "missing FILE"
	case len(args) == 1:
		return "FILE is empty"
	}
	return fmt.Sprintf("%d arguments where one FILE is expected: flags go before FILE (an argument after it is not read as a flag)", len(args))
}

// version is the module version and VCS revision the binary was built from.
func version() string { return versionOf(debug.ReadBuildInfo()) }

// versionOf formats the build information bi (ok false: none) as
// "ratedb VERSION [REVISION[+dirty]] GOVERSION", one space between fields:
// VERSION is the main module's version ("(devel)" when the go command
// stamped none, as under go run or with -buildvcs=false), REVISION the VCS
// revision, present only when the go command stamped it.
func versionOf(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "ratedb (devel)"
	}
	fields := []string{"ratedb", "(devel)"}
	if bi.Main.Version != "" {
		fields[1] = bi.Main.Version
	}
	rev, dirty := "", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		fields = append(fields, rev+dirty)
	}
	if bi.GoVersion != "" {
		fields = append(fields, bi.GoVersion)
	}
	return strings.Join(fields, " ")
}
