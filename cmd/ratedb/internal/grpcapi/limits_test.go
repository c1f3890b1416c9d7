package grpcapi_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
)

// Request headers (gRPC metadata) are bounded as the HTTP API bounds its
// headers (16 KiB). grpc-go's own default is 16 MiB, which MaxRecvMsgSize
// does not cover: a grpc.health.v1 Watch stream, which lasts as long as its
// client wants, keeps its headers for its whole life, so one unauthenticated
// connection could make the server hold 16 MiB per stream it opens.
func TestGRPCRequestHeadersAreBounded(t *testing.T) {
	f := start(t, nil)
	req := &rlsv3.RateLimitRequest{Domain: "basic", Descriptors: nil}
	req.Descriptors = append(req.Descriptors, desc("key1", "foo"))

	// What Envoy sends (tracing headers, a request id, ...) is served.
	ok := metadata.AppendToOutgoingContext(context.Background(), "x-pad", strings.Repeat("x", 8<<10))
	_, err := f.client.ShouldRateLimit(ok, req)
	require.NoError(t, err)

	big := metadata.AppendToOutgoingContext(context.Background(), "x-pad", strings.Repeat("x", 64<<10))
	_, err = f.client.ShouldRateLimit(big, req)
	require.Error(t, err, "a request with 64 KiB of headers must be refused")
	assert.NotEqual(t, codes.OK, status.Code(err))

	ctx, cancel := context.WithCancel(big)
	defer cancel()
	w, err := healthpb.NewHealthClient(f.conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	require.Error(t, err, "a Watch stream with 64 KiB of headers must be refused")
}

// One client connection may have at most DefaultMaxConcurrentStreams calls
// open at once, and says so in its SETTINGS frame: grpc-go's default is
// unlimited, so one connection could open any number of calls (health Watch
// streams last as long as their client likes). 1024 is Envoy's default
// circuit breaker max_requests, so a default Envoy is never held back.
func TestGRPCConcurrentStreamsAreBoundedByDefault(t *testing.T) {
	f := start(t, nil)
	n, ok := proctest.AdvertisedMaxStreams(t, f.addr)
	require.True(t, ok, "the server must advertise SETTINGS_MAX_CONCURRENT_STREAMS")
	assert.Equal(t, uint32(grpcapi.DefaultMaxConcurrentStreams), n)
	assert.Equal(t, 1024, grpcapi.DefaultMaxConcurrentStreams)
}

// A call past the limit waits (a grpc-go client, as Envoy, holds it until a
// stream is free) instead of running; it runs once a stream is free.
func TestGRPCCallsPastTheStreamLimitWait(t *testing.T) {
	f := startStreams(t, nil, 0, 1)
	watchCtx, endWatch := context.WithCancel(context.Background())
	defer endWatch()
	w, err := healthpb.NewHealthClient(f.conn).Watch(watchCtx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = w.Recv()
	require.NoError(t, err, "the Watch holds the connection's only stream")

	req := &rlsv3.RateLimitRequest{Domain: "basic", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("key1", "foo")}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = f.client.ShouldRateLimit(ctx, req)
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "a second call must wait, not run: %v", err)

	endWatch()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = f.client.ShouldRateLimit(ctx, req)
	require.NoError(t, err, "the call runs once the stream is free")
}

// A call whose request message does not arrive (a client that opens streams
// and never sends their messages, or only part of them) is answered
// DEADLINE_EXCEEDED once grpcapi.RecvTimeout has passed, and its stream
// closed: grpc-go would wait for the message as long as the client likes,
// holding a goroutine and what the client sent, up to MaxRecvMsgSize, for
// each of the 1024 streams of each connection. The service's unary calls and
// health's Watch stream are all bounded; a call that sends its message is
// served as before.
func TestGRPCCallWithoutItsMessageIsEnded(t *testing.T) {
	grpcapi.SetRecvTimeout(t, 300*time.Millisecond)
	f := start(t, nil)
	for _, method := range []string{
		"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
		"/grpc.health.v1.Health/Check",
		"/grpc.health.v1.Health/Watch",
	} {
		t.Run(method, func(t *testing.T) {
			// The client's own end, should the server never answer: a
			// cancellation (CANCELED), told apart from the server's answer.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			watchdog := time.AfterFunc(10*time.Second, cancel)
			defer watchdog.Stop()
			s, err := f.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
			require.NoError(t, err)
			// grpc-go sent the call's headers; it sends no message.
			err = s.RecvMsg(new(rlsv3.RateLimitResponse))
			require.Equal(t, codes.DeadlineExceeded, status.Code(err), "the server must end the call: %v", err)
			assert.Contains(t, status.Convert(err).Message(), "did not arrive within 300ms")
		})
	}
	// Calls that send their message are unaffected.
	req := &rlsv3.RateLimitRequest{Domain: "basic", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("key1", "foo")}}
	_, err := f.client.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
	_, err = healthpb.NewHealthClient(f.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
}

// A connection with no call in flight for grpcapi.IdleTimeout is closed, as
// the HTTP API closes an idle one: grpc-go's default kept a connection that
// finished its handshake and then sent nothing open for ever, so one client
// could hold any number of them. The server says GOAWAY first, so that
// Envoy or a grpc-go client opens a new connection for its next call; one
// such call still works.
func TestGRPCIdleConnectionIsClosed(t *testing.T) {
	grpcapi.SetIdleTimeout(t, 300*time.Millisecond)
	f := start(t, nil)
	c, err := net.Dial("tcp", f.addr)
	require.NoError(t, err)
	defer c.Close()
	// The deadline is the test's own end: without the bound the server
	// would keep the connection for ever.
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	// The client preface and an empty SETTINGS frame: the handshake is
	// done, and the client sends nothing more but the acknowledgement of
	// the server's pings (the one that follows the first GOAWAY included).
	_, err = io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	require.NoError(t, err)
	goaway := false
	for {
		var hdr [9]byte // length (24 bits), type, flags, stream id
		if _, err = io.ReadFull(c, hdr[:]); err != nil {
			break
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err = io.ReadFull(c, payload); err != nil {
			break
		}
		switch {
		case hdr[3] == 0x7: // GOAWAY
			goaway = true
		case hdr[3] == 0x6 && hdr[4]&0x1 == 0: // PING, not an ACK
			_, err = c.Write(append([]byte{0, 0, 8, 0x6, 0x1, 0, 0, 0, 0}, payload...))
			require.NoError(t, err)
		}
	}
	require.ErrorIs(t, err, io.EOF, "the server must close the idle connection")
	assert.True(t, goaway, "the server must say GOAWAY before it closes")

	req := &rlsv3.RateLimitRequest{Domain: "basic", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("key1", "foo")}}
	_, err = f.client.ShouldRateLimit(context.Background(), req)
	require.NoError(t, err)
}
