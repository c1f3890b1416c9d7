package envoye2e_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
)

// limitOf returns the requests_per_unit c's service applies to domain
// edge's user descriptor.
func limitOf(t *testing.T, c rlsv3.RateLimitServiceClient) uint32 {
	return call(t, c, "edge", 0, desc("user", "probe")).GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
}

func edgeYAML(n int) string {
	return "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: " + strconv.Itoa(n) + "}\n"
}

// A config file whose new version has the same size and modification time
// as the old one is reloaded by polling. Files with normalized mtimes are
// common: every file of the Nix store has mtime 1 (NixOS's /etc/... links
// point there), reproducible tarballs and images use SOURCE_DATE_EPOCH, and
// `cp -p`/`tar x` keep the source's; changing requests_per_unit from 10 to
// 20 keeps the size.
func TestPollSeesChangeWithSameSizeAndMtime(t *testing.T) {
	store := t.TempDir()
	dir := t.TempDir()
	epoch := time.Unix(1, 0)
	version := func(name string, n int) string {
		p := filepath.Join(store, name)
		require.NoError(t, os.WriteFile(p, []byte(edgeYAML(n)), 0o644))
		require.NoError(t, os.Chtimes(p, epoch, epoch))
		return p
	}
	link := filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.Symlink(version("v1-edge.yaml", 10), link))

	t.Run("symlink swapped to a new version", func(t *testing.T) {
		p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir, "--envoy-config-poll", "10ms")
		c := p.client(t, nil)
		require.EqualValues(t, 10, limitOf(t, c))
		tmp := filepath.Join(t.TempDir(), "link")
		require.NoError(t, os.Symlink(version("v2-edge.yaml", 20), tmp))
		require.NoError(t, os.Rename(tmp, link))
		eventually(t, "the new version to be loaded", func() bool { return limitOf(t, c) == 20 })
	})
	t.Run("file rewritten in place with its mtime kept", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "edge.yaml")
		require.NoError(t, os.WriteFile(file, []byte(edgeYAML(30)), 0o644))
		require.NoError(t, os.Chtimes(file, epoch, epoch))
		p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", file, "--envoy-config-poll", "10ms")
		c := p.client(t, nil)
		require.EqualValues(t, 30, limitOf(t, c))
		require.NoError(t, os.WriteFile(file, []byte(edgeYAML(40)), 0o644))
		require.NoError(t, os.Chtimes(file, epoch, epoch))
		eventually(t, "the rewritten file to be loaded", func() bool { return limitOf(t, c) == 40 })
	})
}

// A Kubernetes ConfigMap volume swaps its ..data symlink to a new
// timestamped directory; with --envoy-config-ignore-dotfiles the visible
// files are links through ..data.
func TestPollSeesConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	writeVersion := func(name string, n int) {
		require.NoError(t, os.Mkdir(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "edge.yaml"), []byte(edgeYAML(n)), 0o644))
	}
	writeVersion("..2026_01_01_00_00_00.1", 10)
	require.NoError(t, os.Symlink("..2026_01_01_00_00_00.1", filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink("..data/edge.yaml", filepath.Join(dir, "edge.yaml")))
	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", dir,
		"--envoy-config-ignore-dotfiles", "--envoy-config-poll", "10ms")
	c := p.client(t, nil)
	require.EqualValues(t, 10, limitOf(t, c))
	writeVersion("..2026_01_01_00_00_01.2", 20)
	require.NoError(t, os.Symlink("..2026_01_01_00_00_01.2", filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "..2026_01_01_00_00_00.1")))
	eventually(t, "the swapped ConfigMap to be loaded", func() bool { return limitOf(t, c) == 20 })
}

// A reload that failed because a file could not be read is retried by
// polling once the file becomes readable, though chmod changes neither its
// size nor its mtime (a new version written 0600 by a deploy tool running
// as root, its mode fixed a moment later). Run as another user, since root
// reads any file.
func TestPollRetriesOnceFileBecomesReadable(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the service as another user")
	}
	const nobody = 65534
	top, err := os.MkdirTemp("", "ratedb-perm")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	require.NoError(t, os.Chmod(top, 0o777))
	require.NoError(t, os.Chmod(filepath.Dir(binary), 0o755))
	dir := filepath.Join(top, "config")
	require.NoError(t, os.Mkdir(dir, 0o755))
	file := filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.WriteFile(file, []byte(edgeYAML(10)), 0o644))
	attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	p := startProcWith(t, attr, filepath.Join(top, "state.db"), "--envoy-config", dir, "--envoy-config-poll", "10ms")
	c := p.client(t, nil)
	require.EqualValues(t, 10, limitOf(t, c))

	require.NoError(t, os.Chmod(file, 0o600))
	require.NoError(t, os.WriteFile(file, []byte(edgeYAML(20)), 0o600))
	eventually(t, "the failed reload to be logged", func() bool {
		return strings.Contains(p.logs.String(), "permission denied")
	})
	require.EqualValues(t, 10, limitOf(t, c), "the previous config stays")
	require.NoError(t, os.Chmod(file, 0o644))
	eventually(t, "the readable file to be loaded", func() bool { return limitOf(t, c) == 20 })
}
