package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Real Redis servers for the tests: never a stand-in. A test that needs
// Redis calls needRedis; when redis-server is not on PATH it fails if
// RATEDB_REQUIRE_REDIS=1 (as scripts/test.sh sets) and is skipped otherwise.

func needRedis(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err == nil {
		return
	}
	if os.Getenv("RATEDB_REQUIRE_REDIS") == "1" {
		t.Fatal("redis-server is not on PATH and RATEDB_REQUIRE_REDIS=1 (install it: apt-get install -y redis-server)")
	}
	t.Skip("redis-server is not on PATH: skipping the Redis tests (scripts/test.sh installs it and sets RATEDB_REQUIRE_REDIS=1)")
}

// server is a redis-server process on a loopback port, in its own temporary
// directory, without persistence.
type server struct {
	t    testing.TB
	dir  string
	port int
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// startServer starts a throwaway redis-server with the given extra
// arguments and stops it in t.Cleanup.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	needRedis(t)
	s := &server{t: t, dir: t.TempDir(), args: args}
	for attempt := 0; ; attempt++ {
		s.port = freePort(t)
		err := s.start()
		if err == nil {
			break
		}
		if attempt == 5 {
			t.Fatalf("redis-server: %v", err)
		}
	}
	t.Cleanup(s.Stop)
	return s
}

func (s *server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs redis-server on s.port and waits until it answers PING.
func (s *server) start() error {
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", filepath.Join(s.dir, "redis.log"),
	}, s.args...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("exited early: %s", lastLines(string(log), 5))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("no PING answer after 10s: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling an external process coming up
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	go func() { <-exited; s.mu.Lock(); s.cmd = nil; s.mu.Unlock() }()
	return nil
}

// Stop kills the server (SIGKILL, after a SIGCONT in case it is paused) and
// waits for it to exit. Idempotent.
func (s *server) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sigCont)
	_ = cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		gone := s.cmd == nil
		s.mu.Unlock()
		if gone {
			return
		}
		time.Sleep(5 * time.Millisecond) // waiting for the process to exit
	}
	s.t.Errorf("redis-server on port %d did not exit", s.port)
}

// Restart starts the server again on the same port, empty.
func (s *server) Restart() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("restart redis-server: %v", err)
	}
}

// Pause stops the server process (SIGSTOP): connections stay open but
// nothing answers. Resume continues it. Where there are no such signals,
// Pause skips the test.
func (s *server) Pause() {
	if sigStop == nil {
		s.t.Skip("pausing a process needs SIGSTOP")
	}
	s.signal(sigStop)
}
func (s *server) Resume() { s.signal(sigCont) }

func (s *server) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && sig != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Client returns a new client of the server, closed in t.Cleanup.
func (s *server) Client(t testing.TB, opts *redis.Options) *redis.Client {
	var o redis.Options
	if opts != nil {
		o = *opts
	}
	o.Addr = s.Addr()
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// freePort returns a loopback port that is free, and whose cluster bus port
// (port + 10000) is free too.
func freePort(t testing.TB) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		p := 20000 + rand.IntN(10000)
		if portFree(p) && portFree(p+10000) {
			return p
		}
	}
	t.Fatal("no free port pair found")
	return 0
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// cluster is a 3-master Redis Cluster on loopback, without replicas.
type cluster struct {
	nodes []*server
}

// startCluster starts three cluster-enabled servers, joins them with
// redis-cli --cluster create and waits until every node reports
// cluster_state:ok. Everything stops in t.Cleanup.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	needRedis(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatal("redis-cli is not on PATH (it comes with redis-server: apt-get install -y redis-server)")
	}
	c := &cluster{}
	args := []string{"redis-cli", "--cluster", "create"}
	for i := 0; i < 3; i++ {
		n := startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		c.nodes = append(c.nodes, n)
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.nodes {
		cl := n.Client(t, nil)
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok after 20s: %v %s", err, info)
			}
			time.Sleep(20 * time.Millisecond) // polling external processes agreeing
		}
	}
	return c
}

func (c *cluster) Addrs() []string {
	var a []string
	for _, n := range c.nodes {
		a = append(a, n.Addr())
	}
	return a
}

// Client returns a new cluster client, closed in t.Cleanup.
func (c *cluster) Client(t testing.TB, opts *redis.ClusterOptions) *redis.ClusterClient {
	var o redis.ClusterOptions
	if opts != nil {
		o = *opts
	}
	o.Addrs = c.Addrs()
	cl := redis.NewClusterClient(&o)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}
