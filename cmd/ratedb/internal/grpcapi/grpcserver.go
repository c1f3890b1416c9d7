package grpcapi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// ErrTLSConfig is returned (wrapped) by TLSConfig for an incomplete or
// unreadable set of TLS files.
var ErrTLSConfig = errors.New("grpcapi: invalid TLS configuration")

// TLSConfig builds the server's TLS configuration from PEM files. certFile
// and keyFile must be given together; clientCAFile, when given, requires and
// verifies client certificates signed by it (mutual TLS, as Envoy's
// rate_limit_service cluster can be configured to present). All three
// empty returns nil: plaintext.
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
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTLSConfig, err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
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

// NewGRPCServer returns a gRPC server with s registered as the v3
// RateLimitService and a grpc.health.v1 service reporting SERVING for ""
// and for envoy.service.ratelimit.v3.RateLimitService. Call the returned
// health server's Shutdown before stopping to report NOT_SERVING. tlsConf
// nil serves plaintext.
func NewGRPCServer(s *Server, tlsConf *tls.Config) (*grpc.Server, *health.Server) {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(1 << 20),
		// Request headers (metadata) as the HTTP API bounds them: grpc-go's
		// default of 16 MiB is outside MaxRecvMsgSize, and a health Watch
		// stream keeps its headers for as long as its client likes.
		grpc.MaxHeaderListSize(MaxHeaderListSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if tlsConf != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConf)))
	}
	g := grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(g, s)
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	h.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	// envoyproxy/ratelimit's name (its src/server/server_impl.go), which
	// health checks configured for it ask for.
	h.SetServingStatus("ratelimit", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, h)
	return g, h
}
