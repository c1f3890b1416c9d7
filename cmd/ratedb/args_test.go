package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stray argument is named in the usage error, but never a URL's password:
// a Cluster list written with spaces instead of commas, or a URL after a
// boolean flag, lands there.
func TestUnexpectedArgumentHidesAPassword(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--redis", "redis://:s3cret@10.0.0.1:6379", "redis://:s3cret@10.0.0.2:6379"},
		{"serve", "--fail-open", "redis://user:s3cret@10.0.0.1:6379"},
		{"serve", "--fail-open", "user:s3cret@10.0.0.1:6379"},
	} {
		_, stderr, code := runTool(t, args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Contains(t, stderr, "unexpected argument", "%v", args)
		assert.NotContains(t, stderr, "s3cret", "%v", args)
	}
	_, stderr, _ := runTool(t, "serve", "extra")
	assert.Contains(t, stderr, `"extra"`, "an argument without credentials is still named")
}

// A flag's bad value is named in the usage error, but never one holding
// '@': a URL with a password given to the wrong flag lands there.
func TestBadFlagValueHidesAPassword(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--redis-timeout", "redis://:s3cret@10.0.0.1:6379"},
		{"serve", "--fail-open=redis://user:s3cret@10.0.0.1:6379"},
		{"inspect", "--json=user:s3cret@h"},
	} {
		_, stderr, code := runTool(t, args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Contains(t, stderr, "invalid", "%v", args)
		assert.Contains(t, stderr, "usage: ratedb", "%v: the usage follows", args)
		assert.NotContains(t, stderr, "s3cret", "%v", args)
	}
	_, stderr, _ := runTool(t, "serve", "--redis-timeout", "soon")
	assert.Contains(t, stderr, `"soon"`, "a value without credentials is still named")
	_, stderr, code := runTool(t, "serve", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "usage: ratedb serve")
	assert.Equal(t, 1, strings.Count(stderr, "usage: ratedb serve"), "the usage once")
}

// A value that parses but is refused later (a file that cannot be used,
// an address that cannot be bound) is named in the error that ends the
// start, but never one holding '@': a Redis URL with its password given to
// --db, --rules or --http instead of --redis lands there, cleaned or quoted.
func TestRefusedValueHidesAPassword(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		flag string
		args []string
	}{
		{"opening", []string{"--db", missing + "/redis://:s3cret@10.0.0.1:6379/0"}},
		{"--http", []string{"--db", filepath.Join(t.TempDir(), "s.db"), "--http", "user:s3cret@10.0.0.1:6379"}},
		{"--rules", []string{"--db", filepath.Join(t.TempDir(), "s.db"), "--rules", "redis://:s3cret@10.0.0.1:6379/0"}},
		{"--api-keys-file", []string{"--db", filepath.Join(t.TempDir(), "s.db"), "--api-keys-file=redis://u:s3cret@h:6379"}},
		{"--envoy-config", []string{"--db", filepath.Join(t.TempDir(), "s.db"), "--grpc", "127.0.0.1:0", "--envoy-config", "redis://:s3cret@h/0"}},
	} {
		args := append([]string{"serve", "--http", "127.0.0.1:0"}, tc.args...)
		_, stderr, code := runToolWithin(t, 30*time.Second, args...)
		assert.Equal(t, 1, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "ratedb serve: "+tc.flag, "%v: the error names the flag", args)
		assert.Contains(t, stderr, "(a value not shown: it holds '@', as a password in a URL would)", "%v", args)
		assert.NotContains(t, stderr, "s3cret", "%v", args)
	}
	_, stderr, code := runTool(t, "serve", "--http", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "s.db"), "--rules", missing+".yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, missing+".yaml", "a value without '@' is still named")
}

// flag names the whole argument, unquoted, in some errors ("bad flag
// syntax: ---redis=...", "flag provided but not defined: -redis:..."), and
// quotes a value with escapes (`\"`): a password must not show in any.
func TestMistypedFlagHidesAPassword(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "---redis=redis://user:s3cret@10.0.0.1:6379"},
		{"serve", "--redis:redis://user:s3cret@10.0.0.1:6379"},
		{"serve", "-=redis://user:s3cret@10.0.0.1:6379"},
		{"serve", `--redis-timeout=redis://user:s3"cret@10.0.0.1:6379`},
		{"inspect", `--json=u:s3"cret@h`},
	} {
		_, stderr, code := runTool(t, args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Contains(t, stderr, "usage: ratedb", "%v: the usage follows", args)
		assert.NotContains(t, stderr, "s3", "%v", args)
	}
	_, stderr, _ := runTool(t, "serve", "---redis=localhost:6379")
	assert.Contains(t, stderr, "---redis=localhost:6379", "an argument without credentials is still named")
}

// The file tools and version handle their arguments as serve does: -h
// prints the usage and exits 0, a stray argument is a usage error (exit 2),
// and "--" ends the flags, so a file whose name starts with '-' can be
// named.
func TestToolArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		code  int
		usage string
	}{
		{[]string{"compact", "-h"}, 0, "usage: ratedb compact FILE"},
		{[]string{"compact", "--help"}, 0, "usage: ratedb compact FILE"},
		{[]string{"compact"}, 2, "usage: ratedb compact FILE"},
		{[]string{"compact", "a.db", "b.db"}, 2, "usage: ratedb compact FILE"},
		{[]string{"compact", "--json", "a.db"}, 2, "usage: ratedb compact FILE"},
		{[]string{"inspect", "-h"}, 0, "usage: ratedb inspect"},
		{[]string{"inspect", "a.db", "b.db"}, 2, "usage: ratedb inspect"},
		{[]string{"version", "--json"}, 2, "usage: ratedb version"},
		{[]string{"version", "extra"}, 2, "usage: ratedb version"},
	} {
		out, stderr, code := runTool(t, tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.usage, "%v", tc.args)
		assert.Equal(t, 1, strings.Count(stderr, tc.usage), "%v: the usage once", tc.args)
		assert.Empty(t, out, "%v", tc.args)
	}
	// compact's usage says that it keeps the damaged file a rebuild
	// leaves (see TestCompactSaysHowManyWindowsDamageTook).
	_, stderr, _ := runTool(t, "compact", "-h")
	assert.Contains(t, stderr, "kept beside it as FILE.corrupt-<unix-ms>")
	// A usage error says what is wrong, without showing the arguments
	// (one after FILE may be a --prefix value: a client's key).
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"inspect"}, "ratedb inspect: missing FILE\n"},
		{[]string{"inspect", "--json", ""}, "ratedb inspect: FILE is empty\n"},
		{[]string{"inspect", "a.db", "--prefix", "user-42"}, "ratedb inspect: 3 arguments where one FILE is expected: flags go before FILE"},
		{[]string{"compact"}, "ratedb compact: missing FILE\n"},
		{[]string{"compact", ""}, "ratedb compact: FILE is empty\n"},
		{[]string{"compact", "a.db", "b.db"}, "ratedb compact: 2 arguments where one FILE is expected"},
	} {
		_, stderr, code := runTool(t, tc.args...)
		assert.Equal(t, 2, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.msg, "%v", tc.args)
		assert.NotContains(t, stderr, "user-42", "%v", tc.args)
	}

	out, stderr, code := runTool(t, "version")
	assert.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(out, "ratedb "), out)

	// "--" lets compact name a file whose name starts with '-'.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "-state.db"), nil, 0o600))
	cmd := exec.Command(binary(t), "compact", "--", "-state.db")
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	require.Error(t, err, "an empty file is no ratedb file")
	assert.Contains(t, string(b), "zero-byte file", "compact opened the file")
	assert.Contains(t, string(b), "-state.db: ", "the error names the file")
	assert.NotContains(t, string(b), "usage:")
}
