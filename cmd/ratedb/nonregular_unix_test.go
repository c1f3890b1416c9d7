//go:build unix

package main_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// The keys, rules and TLS files must be regular files, or symbolic links to
// one: a named pipe (FIFO) nothing writes to, which blocked the start at
// its open, and a character device, which was read until the 16 MiB bound
// (/dev/null as an empty file), end the start at once with a message naming
// the flag and the file and saying what it is, before the state is opened.
// Each run is bounded: a start blocked on the pipe fails the test after
// 20 s instead of hanging it.
func TestNonRegularFilesRefusedByName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	link := filepath.Join(dir, "link") // to the pipe
	require.NoError(t, os.Symlink(fifo, link))
	grpc := []string{"--grpc", "127.0.0.1:0"}
	for _, bad := range []struct{ path, what string }{
		{fifo, "a named pipe (FIFO)"},
		{link, "a named pipe (FIFO)"},
		{"/dev/null", "a character device"},
	} {
		for _, tc := range []struct {
			flag string
			args []string
		}{
			{"--api-keys-file", []string{"--api-keys-file", bad.path}},
			{"--admin-keys-file", []string{"--admin-keys-file", bad.path}},
			{"--rules", []string{"--rules", bad.path}},
			{"--grpc-tls-cert, --grpc-tls-key", append(grpc, "--grpc-tls-cert", bad.path, "--grpc-tls-key", key)},
			{"--grpc-tls-cert, --grpc-tls-key", append(grpc, "--grpc-tls-cert", cert, "--grpc-tls-key", bad.path)},
			{"--grpc-client-ca", append(grpc, "--grpc-tls-cert", cert, "--grpc-tls-key", key, "--grpc-client-ca", bad.path)},
		} {
			db := filepath.Join(t.TempDir(), "s.db")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			cmd := exec.CommandContext(ctx, binary(t), append([]string{"serve", "--db", db, "--http", "127.0.0.1:0"}, tc.args...)...)
			cmd.Env = append(os.Environ(), "RATEDB_API_KEYS=", "RATEDB_ADMIN_KEYS=")
			out, err := cmd.CombinedOutput()
			blocked := ctx.Err()
			cancel()
			require.NoError(t, blocked, "%v: the start blocked (killed after 20 s): %s", tc.args, out)
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "%v: %v: %s", tc.args, err, out)
			assert.Equal(t, 1, ee.ExitCode(), "%v: %s", tc.args, out)
			assert.Contains(t, string(out), tc.flag+": ", "%v", tc.args)
			assert.Contains(t, string(out), bad.path+": fileread: not a regular file: it is "+bad.what, "%v", tc.args)
			assert.NotContains(t, string(out), "listening", "%v", tc.args)
			assert.NoFileExists(t, db, "%v: the state file was opened before the file was read", tc.args)
		}
	}
}

// The stored rules file, PATH.rules.json beside the state file PATH, is read
// as the files of the flags are: a named pipe in its place (which blocked the
// start at its open), or a symbolic link to a device (to /dev/zero, read until
// memory ran out; /dev/null here), ends the start at once with exit status 1
// and a message naming the file and saying what it is; a file larger than
// rules.MaxFileSize (256 MiB, sparse here) ends it too, naming the bound.
// Nothing listens. Each run is bounded: a start blocked on the pipe fails the
// test after 20 s instead of hanging it.
func TestStoredRulesFileRefusedAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"named pipe", func(t *testing.T, path string) { require.NoError(t, syscall.Mkfifo(path, 0o600)) },
			"fileread: not a regular file: it is a named pipe (FIFO)"},
		{"link to a device", func(t *testing.T, path string) { require.NoError(t, os.Symlink("/dev/null", path)) },
			"fileread: not a regular file: it is a character device"},
		{"larger than the bound", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, nil, 0o600))
			require.NoError(t, os.Truncate(path, rules.MaxFileSize+1))
		}, "fileread: file larger than 256 MiB (268435456 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			path := db + ".rules.json"
			tc.make(t, path)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			cmd := exec.CommandContext(ctx, binary(t), "serve", "--db", db, "--http", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), "RATEDB_API_KEYS=", "RATEDB_ADMIN_KEYS=")
			out, err := cmd.CombinedOutput()
			blocked := ctx.Err()
			cancel()
			require.NoError(t, blocked, "the start blocked (killed after 20 s): %s", out)
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "%v: %s", err, out)
			assert.Equal(t, 1, ee.ExitCode(), "%s", out)
			assert.Contains(t, string(out), "rules: reading the rules file: "+path+": "+tc.want)
			assert.NotContains(t, string(out), "listening")
		})
	}
}
