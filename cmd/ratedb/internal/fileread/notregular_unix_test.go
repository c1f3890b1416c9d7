//go:build unix

package fileread_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/fileread"
)

// readWithin returns ReadFile(path)'s result, failing the test if ReadFile
// is still blocked after 30 s (a passing run never waits): then fifo, when
// not "", is opened for writing and closed, so that a blocked open or read
// ends and the goroutine does not outlive the test.
func readWithin(t *testing.T, path, fifo string) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := fileread.ReadFile(path)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(30 * time.Second):
		if fifo != "" {
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				f.Close()
			}
		}
		<-done
		t.Fatalf("ReadFile(%s) blocked", path)
		return nil, nil
	}
}

// Only a regular file, or a symbolic link to one, is read: a named pipe,
// which blocked the open until some process opened it for writing, and a
// character device, which was read until the bound (/dev/null as an empty
// file), are refused at once with an error naming the path and saying what
// it is, through a symbolic link too.
func TestReadFileRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	fifoLink := filepath.Join(dir, "fifo-link")
	require.NoError(t, os.Symlink(fifo, fifoLink))
	devLink := filepath.Join(dir, "dev-link")
	require.NoError(t, os.Symlink("/dev/null", devLink))

	for _, tc := range []struct {
		name, path, want string
	}{
		{"fifo", fifo, fifo + ": fileread: not a regular file: it is a named pipe (FIFO)"},
		{"link to a fifo", fifoLink, fifoLink + ": fileread: not a regular file: it is a named pipe (FIFO)"},
		{"character device", "/dev/null", "/dev/null: fileread: not a regular file: it is a character device"},
		{"link to a character device", devLink, devLink + ": fileread: not a regular file: it is a character device"},
		{"directory", dir, dir + ": fileread: not a regular file: it is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readWithin(t, tc.path, fifo)
			require.ErrorIs(t, err, fileread.ErrNotRegular)
			assert.Equal(t, tc.want, err.Error())
			assert.Nil(t, b)
		})
	}
}

// A symbolic link to a regular file is read, through a chain of links as a
// Kubernetes Secret or ConfigMap volume makes them (key -> ..data/key,
// ..data -> ..2024_01_01_00_00_00.1/).
func TestReadFileFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "..2024_01_01_00_00_00.1")
	require.NoError(t, os.Mkdir(real, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(real, "keys"), []byte("k1\n"), 0o600))
	require.NoError(t, os.Symlink(filepath.Base(real), filepath.Join(dir, "..data")))
	link := filepath.Join(dir, "keys")
	require.NoError(t, os.Symlink(filepath.Join("..data", "keys"), link))
	b, err := fileread.ReadFile(link)
	require.NoError(t, err)
	assert.Equal(t, "k1\n", string(b))
}
