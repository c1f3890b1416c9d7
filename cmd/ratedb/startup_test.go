package main_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/fileread"
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

// With no key configured, the development key is printed only once the
// ports are bound: a start ended by a port that is taken printed a key for
// a service that never served.
func TestNoDevKeyWhenAPortIsTaken(t *testing.T) {
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
		{"http taken", []string{"--http", addr}, "--http: listen tcp " + addr},
		{"grpc taken", []string{"--http", "127.0.0.1:0", "--grpc", addr}, "--grpc: listen tcp " + addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a refusal takes milliseconds
			defer cancel()
			cmd := exec.CommandContext(ctx, binary(t), append([]string{"serve", "--db", db}, tc.args...)...)
			cmd.Env = append(os.Environ(), "RATEDB_API_KEYS=", "RATEDB_ADMIN_KEYS=")
			out, err := cmd.CombinedOutput()
			require.NoError(t, ctx.Err(), "ratedb serve did not exit:\n%s", out)
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			assert.Equal(t, 1, ee.ExitCode(), "%s", out)
			assert.Contains(t, string(out), tc.want)
			assert.NotContains(t, string(out), "X-API-Key", "no development key printed")
		})
	}
	// The same start with free ports prints it.
	s := startNoKeys(t, filepath.Join(t.TempDir(), "s.db"), "--grpc", "127.0.0.1:0")
	assert.Equal(t, 0, s.stop(syscall.SIGTERM))
	assert.Contains(t, s.stderr.String(), "X-API-Key: dev-")
}

// An empty --http is refused: net.Listen takes "" as ":0", and the service
// listened on every interface, on a random port (an unset variable in a
// unit file's "--http $ADDR" does that). An empty --redis or --grpc, given,
// is refused too: the service kept its counts in a file of its own,
// unshared with the other instances, or served no gRPC, and said nothing.
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
		{"redis", []string{"--http", "127.0.0.1:0", "--db", "s.db", "--redis", ""}, "--redis is empty: omit it to keep the state in the --db file"},
		{"grpc", []string{"--http", "127.0.0.1:0", "--db", "s.db", "--grpc="}, "--grpc is empty: omit it to serve no gRPC"},
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

// writeSelfSigned writes a self-signed certificate and its key, PEM, into
// dir as cert.pem and key.pem.
func writeSelfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return cert, key
}

// The gRPC TLS flags are checked before the state is opened: a certificate
// without its key, a client CA without a server certificate, and a file
// that cannot be used end the start with a message naming the flag, and
// no state file is created.
func TestGRPCTLSFlagsRefusedByName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"cert without key", []string{"--grpc-tls-cert", cert}, []string{"--grpc-tls-cert and --grpc-tls-key must be given together"}},
		{"key without cert", []string{"--grpc-tls-key", key}, []string{"--grpc-tls-cert and --grpc-tls-key must be given together"}},
		{"client CA without TLS", []string{"--grpc-client-ca", cert}, []string{"--grpc-client-ca needs --grpc-tls-cert and --grpc-tls-key"}},
		{"missing cert", []string{"--grpc-tls-cert", missing, "--grpc-tls-key", key}, []string{"--grpc-tls-cert, --grpc-tls-key: ", missing, "no such file"}},
		{"missing key", []string{"--grpc-tls-cert", cert, "--grpc-tls-key", missing}, []string{"--grpc-tls-cert, --grpc-tls-key: ", missing, "no such file"}},
		{"cert and key swapped", []string{"--grpc-tls-cert", key, "--grpc-tls-key", cert}, []string{"--grpc-tls-cert, --grpc-tls-key: "}},
		{"missing client CA", []string{"--grpc-tls-cert", cert, "--grpc-tls-key", key, "--grpc-client-ca", missing}, []string{"--grpc-client-ca: ", missing, "no such file"}},
		{"client CA without a certificate", []string{"--grpc-tls-cert", cert, "--grpc-tls-key", key, "--grpc-client-ca", key}, []string{"--grpc-client-ca: ", "no certificate in " + key}},
		{"client CA a directory", []string{"--grpc-tls-cert", cert, "--grpc-tls-key", key, "--grpc-client-ca", dir}, []string{"--grpc-client-ca: ", "is a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			_, stderr, code := runTool(t, append([]string{"serve", "--db", db, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"}, tc.args...)...)
			assert.Equal(t, 1, code, stderr)
			for _, w := range tc.want {
				assert.Contains(t, stderr, w)
			}
			assert.NotContains(t, stderr, "listening")
			assert.NotContains(t, stderr, "BEGIN", "no PEM echoed")
			_, err := os.Stat(db)
			assert.True(t, os.IsNotExist(err), "the state file was opened before the TLS flags were checked")
		})
	}
	// The same files, given right, start the service.
	s := start(t, filepath.Join(t.TempDir(), "s.db"), "--grpc", "127.0.0.1:0", "--grpc-tls-cert", cert, "--grpc-tls-key", key, "--grpc-client-ca", cert)
	assert.Contains(t, s.stderr.String(), "client_certs=true")
	assert.Equal(t, 0, s.stop(syscall.SIGTERM))
}

// A default rule the flags make invalid ends the start with a message
// naming the flags of the default rule and the value refused, before the
// state is opened.
func TestBadDefaultRuleRefusedByName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"--default-limit", "-1", "limit -1 is not between 0 and"},
		{"--default-limit", "9223372036854775807", "limit 9223372036854775807 is not between 0 and"},
		{"--default-window", "0s", "window 0s is not between 1ms and"},
		{"--default-window", "-1m", "window -1m0s is not between 1ms and"},
		{"--default-window", "100000h", "window 100000h0m0s is not between 1ms and"},
		{"--default-algorithm", "sliding", `algorithm "sliding" is not fixed, per_key or staggered`},
	} {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			_, stderr, code := runTool(t, "serve", "--db", db, "--http", "127.0.0.1:0", tc.flag+"="+tc.value)
			assert.Equal(t, 1, code, stderr)
			assert.Contains(t, stderr, tc.flag, "the message names the flag")
			assert.Contains(t, stderr, tc.want)
			_, err := os.Stat(db)
			assert.True(t, os.IsNotExist(err), "no state file created")
		})
	}
}

// A keys file or variable that cannot be used ends the start with a
// message naming the flag or the variable, never the key, before the state
// is opened. So does a file given with its variable set: the variable was
// ignored, and a key rotated there never applied.
func TestBadKeysRefusedByName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	long := "SECRET" + strings.Repeat("k", 300)
	longFile := filepath.Join(dir, "long")
	require.NoError(t, os.WriteFile(longFile, []byte("good-key\n"+long+"\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("# no key yet\n"), 0o600))
	missing := filepath.Join(dir, "missing")
	good := filepath.Join(dir, "good")
	require.NoError(t, os.WriteFile(good, []byte("good-file-key\n"), 0o600))
	// Saved as "Unicode" (UTF-16) by Windows Notepad: every character
	// followed by a NUL, which no X-API-Key header can carry, so none of
	// its keys could ever match and every request got 401 without a word.
	utf16 := filepath.Join(dir, "utf16")
	u16 := []byte{0xff, 0xfe} // its byte order mark
	for _, c := range []byte("# ops\nSECRET-utf16-key\n") {
		u16 = append(u16, c, 0)
	}
	require.NoError(t, os.WriteFile(utf16, u16, 0o600))
	// A comment after a key was part of the key, which never matched.
	inline := filepath.Join(dir, "inline")
	require.NoError(t, os.WriteFile(inline, []byte("# keys\ngood-key\nSECRET-key #prod\n"), 0o600))
	ctl := filepath.Join(dir, "ctl")
	require.NoError(t, os.WriteFile(ctl, []byte("# keys\ngood-key\n\nSECRET\x7fkey\n"), 0o600))
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"missing client file", nil, []string{"--api-keys-file", missing}, "--api-keys-file: keys: stat " + missing},
		{"missing admin file", nil, []string{"--admin-keys-file", missing}, "--admin-keys-file: keys: stat " + missing},
		{"empty admin file", nil, []string{"--admin-keys-file", empty}, "--admin-keys-file: keys: no key in the file " + empty},
		// A variable set to no key is refused as a file holding none is:
		// it generated a development key, opening the check API to it.
		{"client variable of commas", []string{"RATEDB_API_KEYS=,,"}, nil, "RATEDB_API_KEYS: keys: no key in the value, only commas and spaces: unset it to give none"},
		{"admin variable of commas and spaces", []string{"RATEDB_ADMIN_KEYS= , "}, nil, "RATEDB_ADMIN_KEYS: keys: no key in the value, only commas and spaces: unset it to give none"},
		{"long key in client file", nil, []string{"--api-keys-file", longFile}, "--api-keys-file: keys: a key of 306 bytes is longer than 256"},
		{"long key in admin file", nil, []string{"--admin-keys-file", longFile}, "--admin-keys-file: keys: a key of 306 bytes is longer than 256"},
		{"long client key in env", []string{"RATEDB_API_KEYS=good-key," + long}, nil, "RATEDB_API_KEYS: keys: a key of 306 bytes is longer than 256"},
		{"long admin key in env", []string{"RATEDB_ADMIN_KEYS=" + long}, nil, "RATEDB_ADMIN_KEYS: keys: a key of 306 bytes is longer than 256"},
		{"client file in UTF-16", nil, []string{"--api-keys-file", utf16}, "--api-keys-file: keys: line 1 of the file " + utf16 + " holds a control character, which no HTTP header can carry (a file saved as UTF-16 holds NULs: save it as UTF-8)"},
		{"client file with a comment after a key", nil, []string{"--api-keys-file", inline}, "--api-keys-file: keys: line 3 of the file " + inline + " holds a '#' after a space or a tab: a comment must be on a line of its own"},
		{"admin file with a comment after a key", nil, []string{"--admin-keys-file", inline}, "--admin-keys-file: keys: line 3 of the file " + inline + " holds a '#' after a space or a tab"},
		{"admin file with a DEL", nil, []string{"--admin-keys-file", ctl}, "--admin-keys-file: keys: line 4 of the file " + ctl + " holds a control character"},
		// A Kubernetes Secret of one key per line, passed in a variable.
		{"client keys on lines in env", []string{"RATEDB_API_KEYS=good-key\nSECRET-2\n"}, nil, "RATEDB_API_KEYS: keys: a key in the value holds a control character, which no HTTP header can carry (separate keys with commas, not line breaks)"},
		{"admin keys on lines in env", []string{"RATEDB_ADMIN_KEYS=good-key\r\nSECRET-2"}, nil, "RATEDB_ADMIN_KEYS: keys: a key in the value holds a control character"},
		// Given empty (an unset variable in "--api-keys-file $KEYS"), a
		// file flag was as not given: the service served with a
		// development key printed in its log, or with the variable's keys.
		{"empty client file flag", nil, []string{"--api-keys-file", ""}, "--api-keys-file is empty: omit it to take RATEDB_API_KEYS, or no client key"},
		{"empty admin file flag", nil, []string{"--admin-keys-file="}, "--admin-keys-file is empty: omit it to take RATEDB_ADMIN_KEYS, or no admin key"},
		{"empty client file flag and variable", []string{"RATEDB_API_KEYS=good-key"}, []string{"--api-keys-file", ""}, "--api-keys-file is empty"},
		{"empty admin file flag, client file", nil, []string{"--api-keys-file", good, "--admin-keys-file", ""}, "--admin-keys-file is empty"},
		{"client file and variable", []string{"RATEDB_API_KEYS=good-key"}, []string{"--api-keys-file", good}, "--api-keys-file and RATEDB_API_KEYS are both set: the variable would be ignored; unset one"},
		{"admin file and variable", []string{"RATEDB_ADMIN_KEYS=good-key"}, []string{"--admin-keys-file", good}, "--admin-keys-file and RATEDB_ADMIN_KEYS are both set: the variable would be ignored; unset one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "s.db")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a refusal takes milliseconds
			defer cancel()
			cmd := exec.CommandContext(ctx, binary(t), append([]string{"serve", "--db", db, "--http", "127.0.0.1:0"}, tc.args...)...)
			cmd.Env = append(os.Environ(), append([]string{"RATEDB_API_KEYS=", "RATEDB_ADMIN_KEYS="}, tc.env...)...)
			out, err := cmd.CombinedOutput()
			require.NoError(t, ctx.Err(), "ratedb serve did not exit:\n%s", out)
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			assert.Equal(t, 1, ee.ExitCode(), "%s", out)
			assert.Contains(t, string(out), tc.want)
			assert.NotContains(t, string(out), "SECRET", "a key is never shown")
			assert.NotContains(t, string(out), "good-key", "a key is never shown")
			assert.NotContains(t, string(out), "X-API-Key", "no development key is generated")
			_, err = os.Stat(db)
			assert.True(t, os.IsNotExist(err), "no state file created")
		})
	}
}

// RATEDB_CPUPROFILE (the benchmark's CPU profile of the run) that cannot
// be written ends the run at once with a message naming it; the run went
// on without the profile, silently. One that can is written.
func TestCPUProfileVariable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path string
		code       int
		want       string
	}{
		{"missing directory", filepath.Join(dir, "missing", "cpu.pprof"), 1, "ratedb: RATEDB_CPUPROFILE: open " + filepath.Join(dir, "missing", "cpu.pprof")},
		{"a directory", dir, 1, "ratedb: RATEDB_CPUPROFILE: open " + dir},
		{"writable", filepath.Join(dir, "cpu.pprof"), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), "version")
			cmd.Env = append(os.Environ(), "RATEDB_CPUPROFILE="+tc.path)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.code, code, stderr.String())
			if tc.code != 0 {
				assert.Contains(t, stderr.String(), tc.want)
				assert.Empty(t, stdout.String(), "the run did not go on")
				return
			}
			assert.Empty(t, stderr.String())
			fi, err := os.Stat(tc.path)
			require.NoError(t, err)
			assert.Positive(t, fi.Size(), "the profile was written")
		})
	}
}

// --log-keys with --log-level debug (in any case) is accepted and puts the
// client id and the route in the check's debug line.
func TestLogKeysAtDebug(t *testing.T) {
	t.Parallel()
	s := start(t, filepath.Join(t.TempDir(), "s.db"), "--log-keys", "--log-level", "DEBUG")
	s.check("visible-client", "/visible-route")
	require.Equal(t, 0, s.stop(syscall.SIGTERM))
	assert.Contains(t, s.stderr.String(), "client_id=visible-client route=/visible-route")
}

// A keys file given by mistake to --rules or --envoy-config ends the start
// with an error giving the line and the reason, never a byte of a key: the
// YAML parsers quoted up to ten bytes of the offending value ("cannot
// unmarshal !!str `SECRET-...`"), a mapping key ("field SECRET-map not
// found"), an anchor's name or a tag.
func TestKeysFileGivenAsConfigQuotesNoKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, data string
		// want is in the --rules error, and in the --envoy-config one
		// unless wantEnvoy is set.
		want, wantEnvoy string
	}{
		{"keys", "# keys\nSECRET-one\nSECRET-two\n", "line 2: cannot unmarshal !!str into rules.File", "line 2: cannot unmarshal !!str into map[interface {}]interface {}"},
		// A comment between two keys ends the first YAML document: what
		// follows is a syntax error, not a second document.
		{"keys with a comment between them", "SECRET-one\n# prod\nSECRET-two\n", "line 1: cannot unmarshal !!str into rules.File; not a rule file: line 2: did not find expected <document start>", "line 1: cannot unmarshal !!str into map[interface {}]interface {}"},
		{"a key with a colon and a space", "SECRET-map: SECRET-value\n", "line 1: unknown field in rules.File (a rule file has only rules:)", "unknown key (a key is one of descriptors, detailed_metric, domain, key,"},
		{"a key read as an alias", "*SECRET-alias\n", "an alias of an anchor that is unknown or contains itself", ""},
		{"a key read as a tag", "!SECRET-tag SECRET-value\n", "line 1: cannot unmarshal a value into rules.File", "line 1: cannot unmarshal a value into map"},
		{"a key repeated", "SECRET-dup: a\nSECRET-dup: b\n", "line 2: a mapping key repeats the one at line 1", "unknown key (a key is one of"},
		{"a numeric key", "12345678: SECRET-value\n", "line 1: unknown field in rules.File", "a key is of type int, not string"},
		{"an alias in a key", "[SECRET-a, *SECRET-b]: SECRET-c\n", "an alias of an anchor that is unknown or contains itself", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			require.NoError(t, os.WriteFile(f, []byte(tc.data), 0o600))
			for _, flags := range [][]string{{"--rules", f}, {"--envoy-config", f, "--grpc", "127.0.0.1:0"}} {
				db := filepath.Join(t.TempDir(), "s.db")
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a refusal takes milliseconds
				defer cancel()
				cmd := exec.CommandContext(ctx, binary(t), append([]string{"serve", "--db", db, "--http", "127.0.0.1:0"}, flags...)...)
				cmd.Env = append(os.Environ(), "RATEDB_API_KEYS=good-key", "RATEDB_ADMIN_KEYS=")
				out, err := cmd.CombinedOutput()
				require.NoError(t, ctx.Err(), "ratedb serve did not exit:\n%s", out)
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				assert.Equal(t, 1, ee.ExitCode(), "%s", out)
				assert.Contains(t, string(out), "ratedb serve: "+flags[0])
				want := tc.want
				if flags[0] == "--envoy-config" && tc.wantEnvoy != "" {
					want = tc.wantEnvoy
				}
				assert.Contains(t, string(out), want)
				for _, secret := range []string{"SECRE", "1234", "good-key"} {
					assert.NotContains(t, string(out), secret, "a key is never shown")
				}
				_, err = os.Stat(db)
				assert.True(t, os.IsNotExist(err), "no state file created")
			}
		})
	}
}

// The keys, rules and TLS files are read with a bound, fileread.MaxSize
// (16 MiB): a larger file, or a device such as /dev/zero (which was read
// until memory ran out), ends the start with a message naming the flag and
// the file, before the state is opened. The file here is sparse.
func TestOversizedFilesRefusedByName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeSelfSigned(t, dir)
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, nil, 0o600))
	require.NoError(t, os.Truncate(big, fileread.MaxSize+1))
	grpc := []string{"--grpc", "127.0.0.1:0"}
	for _, tc := range []struct {
		flag string
		args []string
	}{
		{"--api-keys-file", []string{"--api-keys-file", big}},
		{"--admin-keys-file", []string{"--admin-keys-file", big}},
		{"--rules", []string{"--rules", big}},
		{"--grpc-tls-cert, --grpc-tls-key", append(grpc, "--grpc-tls-cert", big, "--grpc-tls-key", key)},
		{"--grpc-tls-cert, --grpc-tls-key", append(grpc, "--grpc-tls-cert", cert, "--grpc-tls-key", big)},
		{"--grpc-client-ca", append(grpc, "--grpc-tls-cert", cert, "--grpc-tls-key", key, "--grpc-client-ca", big)},
	} {
		db := filepath.Join(t.TempDir(), "s.db")
		cmd := exec.Command(binary(t), append([]string{"serve", "--db", db, "--http", "127.0.0.1:0"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "RATEDB_API_KEYS=", "RATEDB_ADMIN_KEYS=")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v: %s", tc.args, out)
		assert.Equal(t, 1, ee.ExitCode(), "%v: %s", tc.args, out)
		assert.Contains(t, string(out), tc.flag+": ", "%v", tc.args)
		assert.Contains(t, string(out), big+": fileread: file larger than 16 MiB (16777216 bytes)", "%v", tc.args)
		assert.NotContains(t, string(out), "listening", "%v", tc.args)
		assert.NoFileExists(t, db, "%v: the state file was opened before the file was read", tc.args)
	}
}
