package main_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A listen address that cannot be bound, --http's or --grpc's, ends the
// start with one message naming the flag, before either listener serves:
// no "listening" line, and no ERROR from a gRPC server stopped before it
// served. The same fixed address for both is refused by name.
func TestListenAddressConflictsRefusedBeforeServing(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { taken.Close() })
	addr := taken.Addr().String()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"same address for both", []string{"--http", addr, "--grpc", addr}, "--http and --grpc are both " + addr + ": give each its own port"},
		{"http taken", []string{"--http", addr, "--grpc", "127.0.0.1:0"}, "--http: listen tcp " + addr},
		{"grpc taken", []string{"--http", "127.0.0.1:0", "--grpc", addr}, "--grpc: listen tcp " + addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			_, stderr, code := runTool(t, append([]string{"serve", "--db", db}, tc.args...)...)
			assert.Equal(t, 1, code, stderr)
			assert.Contains(t, stderr, tc.want)
			assert.NotContains(t, stderr, "listening", "nothing listened")
			assert.NotContains(t, stderr, "level=ERROR")
		})
	}
	// Port 0 is a free port for each: the same string is no conflict.
	s := start(t, filepath.Join(t.TempDir(), "s.db"), "--grpc", "127.0.0.1:0")
	assert.Equal(t, 0, s.stop(syscall.SIGTERM))
}

// An empty --http is refused: net.Listen takes "" as ":0", and the service
// listened on every interface, on a random port (an unset variable in a
// unit file's "--http $ADDR" does that).
func TestEmptyAddressFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"http", []string{"--http", "", "--db", "s.db"}, "--http is empty: give the address to listen on"},
		{"http with equals", []string{"--http=", "--db", "s.db"}, "--http is empty: give the address to listen on"},
		{"db", []string{"--http", "127.0.0.1:0", "--db", ""}, "--db is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), append([]string{"serve"}, tc.args...)...)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "RATEDB_API_KEYS="+clientKey)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second): // a refusal takes milliseconds
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("ratedb serve %q started instead of refusing:\n%s", tc.args, out)
			}
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			assert.Equal(t, 1, ee.ExitCode(), "%s", out)
			assert.Contains(t, string(out), tc.want)
			assert.NotContains(t, string(out), "listening")
			_, statErr := os.Stat(filepath.Join(cmd.Dir, "s.db"))
			assert.True(t, os.IsNotExist(statErr), "no state file created")
		})
	}
}
