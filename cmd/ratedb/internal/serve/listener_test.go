package serve

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The listener forgets the connections closed since it accepted them, so
// that a long-running server's set stays about as large as the number of
// connections open, and a forced stop closes those still open.
func TestTrackingListenerForgetsClosedConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := newTrackingListener(inner)
	defer ln.Close()
	accept := func() (client, server net.Conn) {
		t.Helper()
		client, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		server, err = ln.Accept()
		require.NoError(t, err)
		return client, server
	}

	var open []net.Conn
	for i := range 1000 {
		client, server := accept()
		if i%100 == 0 {
			open = append(open, client)
			continue
		}
		require.NoError(t, server.Close())
		require.NoError(t, client.Close())
	}
	ln.mu.Lock()
	n := len(ln.conns)
	ln.mu.Unlock()
	assert.LessOrEqual(t, n, 2*minSweep, "1000 accepted, %d open: the set holds the closed ones too", len(open))

	ln.closeAll()
	for _, c := range open {
		_, err := c.Read(make([]byte, 1))
		assert.Error(t, err, "closed by closeAll")
		_ = c.Close()
	}
	client, server := accept()
	defer client.Close()
	_, err = server.Write([]byte{0})
	assert.Error(t, err, "a connection accepted after closeAll is closed")
}
