package serve

import (
	"context"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// tcpUserTimeout is TCP_USER_TIMEOUT (linux/tcp.h), which package syscall
// does not name.
const tcpUserTimeout = 0x12

// recordingListener keeps the connections its listener accepted, as the
// operating system gave them.
type recordingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// grpc-go sets TCP_USER_TIMEOUT (its keepalive timeout, 20 s by default:
// a peer gone without a FIN is dropped once data sent to it has gone
// unacknowledged that long, not after the kernel's 15 minutes of
// retransmissions) only on a connection that is a *net.TCPConn: the
// tracking listener must hand it the connection itself, not a wrapper.
func TestTrackingListenerKeepsGRPCsTCPUserTimeout(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	rec := &recordingListener{Listener: inner}
	ln := newTrackingListener(rec)
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()

	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	// A call is served only once the server has set up the connection's
	// transport, socket options included.
	_, err = healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)

	rec.mu.Lock()
	conns := append([]net.Conn(nil), rec.conns...)
	rec.mu.Unlock()
	require.Len(t, conns, 1)
	raw, err := conns[0].(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var opt int
	var optErr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		opt, optErr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
	}))
	require.NoError(t, optErr)
	assert.Positive(t, opt, "TCP_USER_TIMEOUT (ms) on the server's socket: grpc-go set it")
}
