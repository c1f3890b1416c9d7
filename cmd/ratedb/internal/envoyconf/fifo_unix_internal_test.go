//go:build unix

package envoyconf

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fifo among the config files fails the load at once, as the package
// doc's caveats say: reading it would block until some process wrote to it
// and closed it (found by mutation testing: dropping the regular-file check
// left Load blocked, and no test failed).
func TestLoadRefusesAFifoWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: a\n"), 0o600))
	fifo := filepath.Join(dir, "b.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	err := loadWithoutBlocking(t, dir, fifo)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "b.yaml: not a regular file")
}

// A config file replaced by a fifo between readFile's check and its open
// fails the load at once too: an open for reading of a fifo waits for a
// writer, and the status checked before the open was the old file's.
func TestLoadRefusesAFifoSwappedInBeforeTheOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	require.NoError(t, os.WriteFile(path, []byte("domain: a\n"), 0o600))
	testBeforeOpen = func(p string) {
		testBeforeOpen = nil
		require.Equal(t, path, p)
		require.NoError(t, os.Remove(p))
		require.NoError(t, syscall.Mkfifo(p, 0o600))
	}
	t.Cleanup(func() { testBeforeOpen = nil })
	err := loadWithoutBlocking(t, dir, path)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "a.yaml: not a regular file")
}

// loadWithoutBlocking returns Load(dir)'s error, failing the test if Load
// is still blocked on fifo after 30 s (a passing run never waits).
func loadWithoutBlocking(t *testing.T, dir, fifo string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		// Open the fifo for writing and close it: the blocked open or
		// read ends, so the goroutine does not outlive the test.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("Load blocked on a fifo")
		return nil
	}
}
