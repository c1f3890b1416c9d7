// Package proctest holds what the end-to-end tests of the ratedb command
// share: a concurrency-safe buffer for a process's output and a throwaway
// redis-server on a loopback port. It is imported by tests only.
package proctest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
// scripts/test.sh sets). It fails the test if the server does not accept
// connections within 10 seconds.
func StartRedis(t testing.TB) (addr string, kill func()) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("RATEDB_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not on PATH and RATEDB_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	kill = func() { once.Do(func() { _ = cmd.Process.Kill(); <-exited }) }
	t.Cleanup(kill)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return addr, kill
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not accept connections in 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling an external process coming up
	}
}
