//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package ratedb_test

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bugs 1 and 2 of issue 9: a named pipe made Open block for ever, and a
// device was renamed aside under CorruptMoveAside.
func TestOpenSpecialFiles(t *testing.T) {
	t.Run("fifo", func(t *testing.T) {
		root := t.TempDir()
		p := filepath.Join(root, "f")
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		openNotRegular(t, root, p, "named pipe")
	})
	t.Run("device", func(t *testing.T) {
		// Through a link, so that nothing could ever rename /dev/null itself.
		root := t.TempDir()
		p := filepath.Join(root, "dev")
		require.NoError(t, os.Symlink(os.DevNull, p))
		openNotRegular(t, root, p, "character device")
	})
	t.Run("socket", func(t *testing.T) {
		root := t.TempDir()
		p := filepath.Join(root, "s")
		l, err := net.Listen("unix", p)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		openNotRegular(t, root, p, "socket")
	})
}

// README, Security (and doc.go): the file Open creates has mode 0600, even
// under a permissive umask, since it holds raw keys.
func TestOpenCreatesFileWithMode0600(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "rate.db")
	db := openDB(t, p, nil)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	require.NoError(t, db.Close())
}
