package main_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inflight sends a check with "Expect: 100-continue" and waits for the
// server's 100 Continue, which it sends when the handler starts reading the
// body: from then on the request is in flight until finish sends the body.
func inflight(t *testing.T, s *service) (conn net.Conn, finish func() *http.Response) {
	t.Helper()
	body := `{"client_id":"inflight","route":"/r"}`
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "POST /v1/check HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		clientKey, len(body))
	require.NoError(t, err)
	br := bufio.NewReader(c)
	cont, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusContinue, cont.StatusCode)
	return c, func() *http.Response {
		_, err := c.Write([]byte(body))
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		return resp
	}
}

// waitClosed polls until the service no longer accepts connections.
func waitClosed(t *testing.T, s *service) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.url, "http://"), time.Second)
		if err != nil {
			return
		}
		c.Close()
		require.True(t, time.Now().Before(deadline), "still accepting connections")
		time.Sleep(10 * time.Millisecond) // polling another process
	}
}

func TestSIGTERMFinishesInFlight(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	s := start(t, db, longWindow...)
	_, finish := inflight(t, s)
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	waitClosed(t, s)
	resp := finish()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the request in flight is answered")
	resp.Body.Close()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after the last request")
	}
	assert.Equal(t, 0, s.cmd.ProcessState.ExitCode())

	// It was counted and snapshotted.
	s = start(t, db, longWindow...)
	assert.Equal(t, int64(98), s.check("inflight", "/r").Remain)
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	s := start(t, filepath.Join(t.TempDir(), "s.db"), longWindow...)
	inflight(t, s)
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	waitClosed(t, s)
	// Shutdown waits for the request in flight; the second signal does not.
	assert.Equal(t, 1, s.stop(syscall.SIGINT))
	assert.Contains(t, s.stderr.String(), "second signal")
}

// A request still in flight at --shutdown-timeout is cut off: that is
// logged through the service's logger when it happens (as the gRPC side's
// forced stop is, TestForcedGRPCStopIsLoggedAndImmediate), not only
// reported by the error printed at exit, and the exit status is 1.
func TestShutdownTimeoutCutOffIsLogged(t *testing.T) {
	t.Parallel()
	s := start(t, filepath.Join(t.TempDir(), "s.db"), "--shutdown-timeout", "200ms")
	inflight(t, s) // never finished: in flight until the process exits
	assert.Equal(t, 1, s.stop(syscall.SIGTERM))
	out := s.stderr.String()
	assert.Regexp(t, `level=WARN msg="shutdown: HTTP requests still in flight after --shutdown-timeout; cutting them off"`, out)
	assert.Contains(t, out, "ratedb serve: shutdown: requests still in flight after --shutdown-timeout 200ms were cut off")
}
