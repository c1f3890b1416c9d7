//go:build unix

package fileread

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A file replaced by a named pipe between ReadFile's check and its open is
// refused at once too: an open for reading of a named pipe waits for a
// writer (without O_NONBLOCK), and the status checked before the open was
// the old file's (without the check of the opened file's status, the
// non-blocking read of the pipe returns nothing, an empty file).
func TestReadFileRefusesAFifoSwappedInBeforeTheOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte("k1\n"), 0o600))
	testBeforeOpen = func(p string) {
		testBeforeOpen = nil
		require.Equal(t, path, p)
		require.NoError(t, os.Remove(p))
		require.NoError(t, syscall.Mkfifo(p, 0o600))
	}
	t.Cleanup(func() { testBeforeOpen = nil })
	done := make(chan error, 1)
	go func() {
		_, err := ReadFile(path)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrNotRegular)
		assert.Equal(t, path+": fileread: not a regular file: it is a named pipe (FIFO)", err.Error())
	case <-time.After(30 * time.Second):
		// Open the pipe for writing and close it: the blocked open or
		// read ends, so the goroutine does not outlive the test.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("ReadFile blocked on a named pipe")
	}
}

// A path whose status shows it is not a regular file is never opened
// (opening a device may do something: rewind a tape, raise a serial
// line's DTR, make a terminal the controlling one).
func TestReadFileDoesNotOpenNonRegularFiles(t *testing.T) {
	opened := false
	testBeforeOpen = func(string) { opened = true }
	t.Cleanup(func() { testBeforeOpen = nil })
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, p := range []string{"/dev/null", fifo} {
		_, err := ReadFile(p)
		require.ErrorIs(t, err, ErrNotRegular)
		assert.False(t, opened, "%s was opened", p)
	}
}
