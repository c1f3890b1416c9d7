// Package serve runs `ratedb serve`: it opens the store, loads keys and
// rules, wires the decision core, metrics and the HTTP adapter, and shuts
// down gracefully on SIGTERM or SIGINT.
package serve

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Config is what `ratedb serve` is told by its flags (see main.go for each
// flag's documentation and default).
type Config struct {
	HTTP          string
	DB            string
	Redis         string
	APIKeysFile   string
	AdminKeysFile string
	// APIKeysEnv and AdminKeysEnv are the values of RATEDB_API_KEYS and
	// RATEDB_ADMIN_KEYS, used when the matching file is not given.
	APIKeysEnv, AdminKeysEnv string
	DefaultLimit             int64
	DefaultWindow            time.Duration
	DefaultAlgorithm         string
	Rules                    string
	DenyStatus               int
	FailOpen                 bool
	// RedisTimeout bounds every Redis call of a check (--redis-timeout).
	RedisTimeout time.Duration
	LogFormat    string
	LogLevel     string
	LogKeys      bool
	// SnapshotPeriod is the embedded DB's snapshot period (what a crash can
	// lose).
	SnapshotPeriod time.Duration
	// ShutdownTimeout bounds how long in-flight requests may take after
	// the first signal.
	ShutdownTimeout time.Duration
	// Envoy configures the Envoy rate limit service (gRPC); zero: off.
	Envoy EnvoyConfig
	// Given holds the names of the flags given on the command line, so
	// that a flag whose default is not its zero value is refused where it
	// has no effect.
	Given map[string]bool
}

// minSnapshotPeriod is the shortest --snapshot-period (shorter would make
// an idle server spin).
const minSnapshotPeriod = time.Millisecond

// maxRedisTimeout is the longest --redis-timeout. Rule reads and changes
// get ten times it, which must not overflow a time.Duration (past about 29
// years it did); no Redis call is worth waiting an hour for.
const maxRedisTimeout = time.Hour

// validate reports every problem of c at once.
func (c *Config) validate() error {
	var p []string
	if c.DenyStatus != http.StatusOK && c.DenyStatus != http.StatusTooManyRequests {
		p = append(p, fmt.Sprintf("--deny-status %d: use 200 or 429", c.DenyStatus))
	}
	if f := strings.ToLower(c.LogFormat); f != "text" && f != "json" {
		p = append(p, fmt.Sprintf("--log-format %q: use text or json", c.LogFormat))
	}
	if lvl, err := parseLevel(c.LogLevel); err != nil {
		p = append(p, err.Error())
	} else if c.LogKeys && lvl != slog.LevelDebug {
		p = append(p, "--log-keys needs --log-level debug (client ids and routes go only to debug lines)")
	}
	// A file wins over its variable: the variable's keys, set too, would
	// be ignored (a key rotated there would never apply). Neither value is
	// shown.
	if c.APIKeysFile != "" && c.APIKeysEnv != "" {
		p = append(p, "--api-keys-file and RATEDB_API_KEYS are both set: the variable would be ignored; unset one")
	}
	if c.AdminKeysFile != "" && c.AdminKeysEnv != "" {
		p = append(p, "--admin-keys-file and RATEDB_ADMIN_KEYS are both set: the variable would be ignored; unset one")
	}
	// Given empty (an unset variable in "--api-keys-file $KEYS"), a keys
	// file flag read as not given: with no other key, the service opened
	// its check API to a development key printed in its log.
	if c.Given["api-keys-file"] && c.APIKeysFile == "" {
		p = append(p, "--api-keys-file is empty: omit it to take RATEDB_API_KEYS, or no client key")
	}
	if c.Given["admin-keys-file"] && c.AdminKeysFile == "" {
		p = append(p, "--admin-keys-file is empty: omit it to take RATEDB_ADMIN_KEYS, or no admin key")
	}
	if c.HTTP == "" {
		// net.Listen would take it as ":0": every interface, a random port.
		p = append(p, "--http is empty: give the address to listen on, such as 127.0.0.1:8080")
	}
	// Empty, they mean "off", as when they are not given: given empty (an
	// unset variable in "--redis $URL"), the service would keep its counts
	// in a file of its own, unshared, or serve no gRPC, and say nothing.
	if c.Given["redis"] && c.Redis == "" {
		p = append(p, "--redis is empty: omit it to keep the state in the --db file")
	}
	// The state file is not opened with --redis: a --db given too would
	// say that counts are kept in a file that is never written.
	if c.Given["db"] && c.Redis != "" {
		p = append(p, "--db applies only to the embedded file (with --redis, the counts and rules live in Redis): omit --db")
	}
	if c.Given["grpc"] && c.Envoy.GRPC == "" {
		p = append(p, "--grpc is empty: omit it to serve no gRPC")
	}
	if c.DB == "" && c.Redis == "" {
		p = append(p, "--db is empty")
	}
	if c.FailOpen && c.Redis == "" {
		p = append(p, "--fail-open applies only with --redis (the embedded file never becomes unavailable)")
	}
	if c.Given["redis-timeout"] && c.Redis == "" {
		p = append(p, "--redis-timeout applies only with --redis")
	}
	if c.Redis != "" && c.RedisTimeout <= 0 {
		p = append(p, "--redis-timeout must be positive")
	}
	if c.Redis != "" && c.RedisTimeout > maxRedisTimeout {
		p = append(p, fmt.Sprintf("--redis-timeout must be at most %v", maxRedisTimeout))
	}
	if c.Given["snapshot-period"] && c.Redis != "" {
		p = append(p, "--snapshot-period applies only to the embedded file (with --redis, Redis keeps the counts)")
	}
	if c.SnapshotPeriod < minSnapshotPeriod {
		p = append(p, fmt.Sprintf("--snapshot-period must be at least %v", minSnapshotPeriod))
	}
	if c.ShutdownTimeout <= 0 {
		p = append(p, "--shutdown-timeout must be positive")
	}
	switch {
	case !sameListenAddr(c.HTTP, c.Envoy.GRPC):
	case c.HTTP == c.Envoy.GRPC:
		p = append(p, fmt.Sprintf("--http and --grpc are both %s: give each its own port", c.HTTP))
	default:
		p = append(p, fmt.Sprintf("--http %s and --grpc %s would listen on the same port: give each its own port", c.HTTP, c.Envoy.GRPC))
	}
	p = c.Envoy.validate(p, c.Given)
	if len(p) > 0 {
		return fmt.Errorf("invalid flags: %s", joinSemi(p))
	}
	return nil
}

// sameListenAddr reports whether listeners on the addresses a and b would
// take the same port, so that the second bind would fail: both name the same
// fixed port (compared as numbers, as net.Listen reads them: ":08080" is
// ":8080"; a service name such as "http" is looked up in /etc/services, never
// in DNS) and either the same host (IP addresses compared as addresses, names
// as strings, in any case) or, for either, every interface (an empty host,
// 0.0.0.0 or ::, which net.Listen makes a dual-stack socket). Port 0, however
// written (":00"), is a free port for each and never clashes; distinct hosts
// on one port (127.0.0.1:8080 and 127.0.0.2:8080) do not either. An address
// that does not parse is left to net.Listen, which reports it by flag.
func sameListenAddr(a, b string) bool {
	ha, pa, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	hb, pb, err := net.SplitHostPort(b)
	if err != nil {
		return false
	}
	na, err := net.LookupPort("tcp", pa)
	if err != nil || na == 0 {
		return false
	}
	nb, err := net.LookupPort("tcp", pb)
	if err != nil || nb != na {
		return false
	}
	return everyInterface(ha) || everyInterface(hb) || sameHost(ha, hb)
}

// everyInterface reports whether the listen host h is every interface: empty,
// or an unspecified address (0.0.0.0, ::).
func everyInterface(h string) bool {
	if h == "" {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsUnspecified()
}

// sameHost reports whether the listen hosts a and b are one: equal IP
// addresses (an IPv4-mapped IPv6 address equals its IPv4 address), or
// equal names in any case. It does no look-up: "localhost" and
// "127.0.0.1" are not the same host here.
func sameHost(a, b string) bool {
	ia, errA := netip.ParseAddr(a)
	ib, errB := netip.ParseAddr(b)
	if errA == nil && errB == nil {
		return ia.Unmap() == ib.Unmap()
	}
	return errA != nil && errB != nil && strings.EqualFold(a, b)
}

func joinSemi(p []string) string {
	s := ""
	for i, x := range p {
		if i > 0 {
			s += "; "
		}
		s += x
	}
	return s
}

// parseLevel reads --log-level: debug, info, warn or error, in any case
// (not slog's offsets such as "warn+1", which the flag does not document).
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q: use debug, info, warn or error", s)
}

// NewLogger returns the service's logger writing to w, as --log-format
// (text or json, in any case, as --log-level) and --log-level ask (an
// invalid level, which Run refuses, logs at info; an invalid format, text).
func NewLogger(c *Config, w io.Writer) *slog.Logger {
	lvl, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: lvl}
	if strings.EqualFold(c.LogFormat, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
