//go:build unix

package envoyconf_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// A fifo among the config files fails the load at once, as the package
// doc's caveats say: reading it would block until some process wrote to it
// and closed it (found by mutation testing: dropping the regular-file check
// left Load blocked, and no test failed). The 30 s bound only ends the
// test when Load hangs; a passing run never waits.
func TestGapLoadRefusesAFifoWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: a\n"), 0o600))
	fifo := filepath.Join(dir, "b.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	done := make(chan error, 1)
	go func() {
		_, err := envoyconf.Load(dir)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, envoyconf.ErrInvalidConfig)
		assert.Contains(t, err.Error(), "b.yaml: not a regular file")
	case <-time.After(30 * time.Second):
		// Open the fifo for writing and close it: the blocked read
		// ends, so the goroutine does not outlive the test.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("Load blocked reading a fifo")
	}
}
