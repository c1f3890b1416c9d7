package grpcapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/fileread"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// ErrTLSConfig is returned (wrapped) by TLSConfig for an incomplete or
// unreadable set of TLS files.
var ErrTLSConfig = errors.New("grpcapi: invalid TLS configuration")

// TLSConfig builds the server's TLS configuration from PEM files. certFile
// and keyFile must be given together; clientCAFile, when given, requires and
// verifies client certificates signed by it (mutual TLS, as Envoy's
// rate_limit_service cluster can be configured to present). All three
// empty returns nil: plaintext. A file that is not a regular file or a
// symbolic link to one (a named pipe, a device) is refused without being
// read (an error wrapping fileread.ErrNotRegular), and so is one of more
// than fileread.MaxSize bytes (fileread.ErrTooLarge).
func TLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		if clientCAFile != "" {
			return nil, fmt.Errorf("%w: a client CA needs a server certificate and key", ErrTLSConfig)
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: the certificate and the key must be given together", ErrTLSConfig)
	}
	// tls.LoadX509KeyPair, with the files' size bounded.
	certPEM, err := fileread.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	keyPEM, err := fileread.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := fileread.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: no certificate in %s", ErrTLSConfig, clientCAFile)
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// MaxHeaderListSize is the most request header (metadata) bytes a gRPC call
// may carry, counted as HTTP/2 does (name, value and 32 bytes per field).
const MaxHeaderListSize = 16 << 10

// HandshakeTimeout bounds how long a new connection may take to finish its
// handshake (TLS, then the HTTP/2 preface and settings), as the HTTP API's
// read-header timeout bounds a request's headers. grpc-go's default is 2
// minutes, and its graceful stop waits for connections in their handshake:
// one client that connects and sends nothing would hold the stop, and the
// final snapshot after it, until --shutdown-timeout.
const HandshakeTimeout = 5 * time.Second

// RecvTimeout bounds how long a call's request message may take to arrive
// once its headers have, as the HTTP API's read timeout bounds a request's
// body: a call whose message has not arrived by then is answered
// DEADLINE_EXCEEDED and its stream closed. grpc-go waits for it without
// end when the client sent no grpc-timeout, so a client that opened
// streams and never finished their messages held each one's goroutine, and
// up to MaxRecvMsgSize of what it did send (grpc-go widens the stream's
// flow-control window to the length a message announces), for as long as
// it liked: up to 1 GiB for each connection at the default stream limit.
// Envoy sends its message with the headers.
const RecvTimeout = 10 * time.Second

// recvTimeout is RecvTimeout; tests shorten it. NewGRPCServer reads it.
var recvTimeout = RecvTimeout

// IdleTimeout is how long a connection may stay open with no call in
// flight before the server closes it (gracefully: GOAWAY, after which a
// client such as Envoy or grpc-go opens a new connection for its next
// call), as the HTTP API's idle timeout. grpc-go's default is never: a
// client that finished its handshake and then sent nothing held its
// connection, a file descriptor, three goroutines and about 20 KB, for
// as long as it liked, and any number of them.
const IdleTimeout = 120 * time.Second

// idleTimeout is IdleTimeout; tests shorten it. NewGRPCServer reads it.
var idleTimeout = IdleTimeout

// DefaultMaxConcurrentStreams is the default number of calls (health Watch
// streams included) that one client connection may have open at once
// (--grpc-max-concurrent-streams); grpc-go's own default is unlimited. It
// is Envoy's default circuit breaker max_requests (1024 per cluster), so an
// Envoy with default thresholds never has more calls in flight to the
// service, on one connection or on all. An Envoy with raised thresholds
// honours the limit the server advertises (HTTP/2 SETTINGS) and opens
// another connection when one is full; a grpc-go client waits for a free
// stream.
const DefaultMaxConcurrentStreams = 1024

// NewGRPCServer returns a gRPC server with s registered as the v3
// RateLimitService and a grpc.health.v1 service reporting SERVING for "",
// for envoy.service.ratelimit.v3.RateLimitService and for "ratelimit" (the
// name envoyproxy/ratelimit registers). Call the returned
// health server's Shutdown before stopping to report NOT_SERVING and end
// the Watch streams. tlsConf nil serves plaintext. maxStreams bounds the
// calls open at once on one connection; 0 means
// DefaultMaxConcurrentStreams. A call's message must arrive within
// RecvTimeout of its headers, and a connection with no call for
// IdleTimeout is closed. Messages are protobuf, decoded by grpc-go's
// codec, except that a RateLimitRequest whose domain, keys or values are
// not UTF-8 is decoded with them as they are (grpc-go would answer
// INTERNAL, and Envoy's default failure_mode_deny: false would let the
// request through uncounted).
func NewGRPCServer(s *Server, tlsConf *tls.Config, maxStreams uint32) (*grpc.Server, *Health) {
	if maxStreams == 0 {
		maxStreams = DefaultMaxConcurrentStreams
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(1 << 20),
		// Calls past the limit wait on the client's side (grpc-go's
		// default would let one connection open any number of them).
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.ConnectionTimeout(HandshakeTimeout),
		// Request headers (metadata) as the HTTP API bounds them: grpc-go's
		// default of 16 MiB is outside MaxRecvMsgSize, and a health Watch
		// stream keeps its headers for as long as its client likes.
		grpc.MaxHeaderListSize(MaxHeaderListSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: idleTimeout}),
		// grpc-go's protobuf codec, but a RateLimitRequest whose strings
		// are not UTF-8 is decoded with them as they are (see codec).
		grpc.ForceServerCodecV2(newCodec()),
	}
	if tlsConf != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConf)))
	}
	g := grpc.NewServer(opts...)
	g.RegisterService(boundRecv(&rlsv3.RateLimitService_ServiceDesc, recvTimeout), s)
	h := &Health{Server: health.NewServer(), stopping: make(chan struct{})}
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	// envoyproxy/ratelimit's name (its src/server/server_impl.go), which
	// health checks configured for it ask for.
	h.SetServingStatus("ratelimit", healthpb.HealthCheckResponse_SERVING)
	g.RegisterService(boundRecv(&healthpb.Health_ServiceDesc, recvTimeout), h)
	return g, h
}

// boundRecv returns a copy of desc whose methods and streams wait at most
// timeout for the request's first message (see RecvTimeout).
func boundRecv(desc *grpc.ServiceDesc, timeout time.Duration) *grpc.ServiceDesc {
	d := *desc
	d.Methods = slices.Clone(desc.Methods)
	for i := range d.Methods {
		h := d.Methods[i].Handler
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(m any) error { return recvWithin(dec, m, timeout) }, in)
		}
	}
	d.Streams = slices.Clone(desc.Streams)
	for i := range d.Streams {
		h := d.Streams[i].Handler
		d.Streams[i].Handler = func(srv any, ss grpc.ServerStream) error {
			return h(srv, &firstRecvBounded{ServerStream: ss, timeout: timeout})
		}
	}
	return &d
}

// recvWithin calls recv(m) and returns its error, or a DEADLINE_EXCEEDED
// status once timeout has passed without it returning. Then recv
// returns when the call's stream is closed (when its handler has
// returned), and m must not be used.
func recvWithin(recv func(any) error, m any, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- recv(m) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return status.Errorf(codes.DeadlineExceeded, "the request message did not arrive within %v", timeout)
	}
}

// firstRecvBounded is a grpc.ServerStream whose first RecvMsg waits at
// most timeout (see recvWithin). Health's Watch, the one stream
// served, receives its one message first.
type firstRecvBounded struct {
	grpc.ServerStream
	timeout  time.Duration
	received bool
}

func (s *firstRecvBounded) RecvMsg(m any) error {
	if s.received {
		return s.ServerStream.RecvMsg(m)
	}
	s.received = true
	return recvWithin(s.ServerStream.RecvMsg, m, s.timeout)
}

// Health is grpc.health.v1 with statuses that change only at Shutdown. Its
// Watch streams end at Shutdown, after reporting NOT_SERVING: grpc-go's
// own Watch lasts until its client ends it, and a graceful stop waits for
// every call, so one watcher (anyone who reaches the port) would hold the
// stop, and the final snapshot after it, until --shutdown-timeout.
type Health struct {
	*health.Server
	stopping chan struct{}
	once     sync.Once
}

// Shutdown reports NOT_SERVING for every service and ends the Watch
// streams.
func (h *Health) Shutdown() {
	h.Server.Shutdown()
	h.once.Do(func() { close(h.stopping) })
}

// Watch sends the service's status, then, at Shutdown (at once if it has
// begun), NOT_SERVING if it sent SERVING, and ends the stream.
func (h *Health) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	st := healthpb.HealthCheckResponse_SERVICE_UNKNOWN
	if resp, err := h.Check(stream.Context(), req); err == nil {
		st = resp.GetStatus()
	}
	if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
		return err
	}
	select {
	case <-stream.Context().Done():
		return status.Error(codes.Canceled, "stream has ended")
	case <-h.stopping:
	}
	if st != healthpb.HealthCheckResponse_SERVING {
		return nil // unknown, or already told NOT_SERVING
	}
	return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING})
}
