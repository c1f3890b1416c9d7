package main_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A service's stderr can break while it runs: under systemd it is a stream
// to journald, which breaks when journald restarts; under a shell, a pipe
// to a log shipper that exits. Go's runtime ends a program that writes to a
// broken fd 2 with SIGPIPE unless the program handles SIGPIPE (systemd's
// IgnoreSIGPIPE=yes does not help: the runtime installs its own handler).
// The next log line must not end the service: the one SIGTERM logs before
// its final snapshot would lose every count since the last snapshot, and a
// SIGHUP's line would end it as the signal's default does.
func TestBrokenStderrDoesNotEndTheService(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	args := append(longWindow, "--default-limit", "10", "--snapshot-period", "1h")
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(binary(t), append([]string{"serve", "--http", "127.0.0.1:0", "--db", db}, args...)...)
	cmd.Env = append(os.Environ(), "RATEDB_API_KEYS="+clientKey, "RATEDB_ADMIN_KEYS="+adminKey)
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	pw.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	sc := bufio.NewScanner(pr)
	s := &service{t: t, db: db}
	for s.url == "" && sc.Scan() {
		if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
			s.url = "http://" + m[1] + m[2]
		}
	}
	require.NotEmpty(t, s.url, "no listening line")
	pr.Close() // stderr is now a broken pipe

	for range 3 {
		require.Equal(t, "Allow", s.check("c", "/r").Status)
	}
	// SIGHUP logs a line; SIGTERM logs one before its final snapshot.
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	assert.Equal(t, 0, cmd.ProcessState.ExitCode(), "%v", cmd.ProcessState)

	s = start(t, db, args...)
	assert.Equal(t, int64(6), s.check("c", "/r").Remain, "the final snapshot kept every hit")
}
