// Package proctest holds what the end-to-end tests of the ratedb command
// share: a concurrency-safe buffer for a process's output, a throwaway
// redis-server on a loopback port (running or stopped), a reader of a gRPC
// server's HTTP/2 settings, and an encoder of Envoy rate limit requests
// whose strings are not UTF-8. It is imported by tests only.
package proctest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
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
)

// SyncBuffer collects a process's output. It is safe for concurrent use.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// StartRedis runs a throwaway redis-server (no persistence) on a free
// loopback port and returns its address and a function that kills it (also
// run by t.Cleanup; safe to call more than once). Without redis-server on
// PATH the test is skipped, or fails when RATEDB_REQUIRE_REDIS=1 (as
// scripts/test.sh sets). A port taken by another process after it was
// picked (the server exits, or something else answers there) is given up
// for another, up to five ports; the test fails if none of them is answered
// by the server started there (INFO's process_id) within 10 seconds.
func StartRedis(t testing.TB) (addr string, kill func()) {
	t.Helper()
	addr, _, kill = startRedis(t)
	return addr, kill
}

// StartStoppedRedis runs a throwaway redis-server as StartRedis does, waits
// until it accepts connections and then stops it (SIGSTOP): a Redis that
// does not answer, whose connections the kernel still completes, as one
// that hangs or whose host is overloaded. It is killed by t.Cleanup. It
// skips where there is no SIGSTOP.
func StartStoppedRedis(t testing.TB) (addr string) {
	t.Helper()
	if stopSignal == nil {
		t.Skip("stopping a process needs SIGSTOP")
	}
	addr, proc, _ := startRedis(t)
	if err := proc.Signal(stopSignal); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startRedis is StartRedis, also returning the server's process.
func startRedis(t testing.TB) (addr string, proc *os.Process, kill func()) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("RATEDB_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not on PATH and RATEDB_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH")
	}
	// The port is free when picked and taken by redis-server later: another
	// process can bind it in between. Then this server exits, or something
	// else answers on the port; either way, try another.
	for attempt := 1; ; attempt++ {
		addr, proc, kill, err := tryStartRedis(t)
		if err == nil {
			t.Cleanup(kill)
			return addr, proc, kill
		}
		if attempt == 5 {
			t.Fatal(err)
		}
		t.Logf("redis-server: %v; trying another port", err)
	}
}

// pickPort returns a loopback address whose port was free a moment ago.
// Tests replace it to hand startRedis a port that is taken.
var pickPort = func() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// tryStartRedis starts a redis-server on a port from pickPort and waits up
// to 10 seconds until it answers there as itself (INFO's process_id is its
// pid). On an error it leaves nothing running.
func tryStartRedis(t testing.TB) (addr string, proc *os.Process, kill func(), err error) {
	addr, err = pickPort()
	if err != nil {
		return "", nil, nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "redis.log")
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", logPath)
	if err := cmd.Start(); err != nil {
		return "", nil, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	kill = func() { once.Do(func() { _ = cmd.Process.Kill(); <-exited }) }
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			return "", nil, nil, fmt.Errorf("redis-server on %s exited at start; its log:\n%s", addr, log)
		default:
		}
		pid, err := redisPID(addr)
		if err == nil {
			if pid != cmd.Process.Pid {
				kill()
				return "", nil, nil, fmt.Errorf("%s is answered by another process (pid %d, not %d)", addr, pid, cmd.Process.Pid)
			}
			return addr, cmd.Process, kill, nil
		}
		if time.Now().After(deadline) {
			kill()
			return "", nil, nil, fmt.Errorf("redis-server on %s did not answer in 10s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond) // polling an external process coming up
	}
}

// redisPID asks the Redis at addr for INFO server and returns its
// process_id.
func redisPID(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("not a Redis INFO reply: %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// StartCluster runs a throwaway 3-master Redis Cluster (no replicas, no
// persistence) on loopback ports, joined with redis-cli --cluster create,
// and returns its nodes' addresses once every node reports
// cluster_state:ok. The servers are killed by t.Cleanup. Without
// redis-server it skips, or fails under RATEDB_REQUIRE_REDIS=1, as
// StartRedis.
func StartCluster(t testing.TB) []string {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("RATEDB_REQUIRE_REDIS") == "1" {
				t.Fatalf("%s is not on PATH and RATEDB_REQUIRE_REDIS=1", bin)
			}
			t.Skipf("%s is not on PATH", bin)
		}
	}
	var addrs []string
	for range 3 {
		port := clusterPort(t)
		dir := t.TempDir()
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"),
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		addr := "127.0.0.1:" + strconv.Itoa(port)
		waitListening(t, addr)
		addrs = append(addrs, addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		for {
			out, err := exec.Command("redis-cli", "-h", host, "-p", port, "cluster", "info").Output()
			if err == nil && strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok after 20s: %v %s", err, out)
			}
			time.Sleep(20 * time.Millisecond) // polling external processes agreeing
		}
	}
	return addrs
}

// clusterPort returns a free loopback port whose cluster bus port (+10000)
// is free too.
func clusterPort(t testing.TB) int {
	t.Helper()
	free := func(p int) bool {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		_ = l.Close()
		return true
	}
	for range 100 {
		p := 20000 + rand.IntN(10000)
		if free(p) && free(p+10000) {
			return p
		}
	}
	t.Fatal("no free port pair found")
	return 0
}

// waitListening waits until addr accepts connections, for up to 10 seconds.
func waitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not accept connections in 10s", addr)
		}
		time.Sleep(10 * time.Millisecond) // polling an external process coming up
	}
}

// StartRedisAt runs a redis-server on addr (a loopback host:port, such as
// one StartRedis returned and killed) with dir as its directory, where an
// RDB or AOF file persists, and the further options args (for example
// "--appendonly", "yes"), so that a test can restart Redis on the address a
// service already uses. It returns a function that kills it (SIGKILL, as a
// crash; also run by t.Cleanup; safe to call more than once). It skips or
// fails without redis-server as StartRedis does, and fails the test if the
// server does not accept connections within 10 seconds.
func StartRedisAt(t testing.TB, addr, dir string, args ...string) (kill func()) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("RATEDB_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not on PATH and RATEDB_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]string{"--port", port, "--bind", host, "--dir", dir, "--logfile", filepath.Join(dir, "redis.log")}, args...)
	cmd := exec.Command("redis-server", all...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	kill = func() { once.Do(func() { _ = cmd.Process.Kill(); <-exited }) }
	t.Cleanup(kill)
	waitListening(t, addr)
	return kill
}
