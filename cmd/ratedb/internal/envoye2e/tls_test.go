package envoye2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials"
)

type certPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	tls  tls.Certificate
}

// issue makes a certificate signed by parent (self-signed when nil).
func issue(t *testing.T, name string, parent *certPair, isCA bool, usage x509.ExtKeyUsage) *certPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: isCA, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &certPair{cert: cert, key: key, tls: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

func writePEM(t *testing.T, path string, p *certPair, withKey bool) {
	t.Helper()
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.cert.Raw})
	require.NoError(t, os.WriteFile(path, out, 0o600))
	if withKey {
		der, err := x509.MarshalECPrivateKey(p.key)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path+".key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600))
	}
}

// TestMutualTLS: with --grpc-client-ca, a client with a certificate from
// that CA is served and one without is refused.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := issue(t, "test CA", nil, true, x509.ExtKeyUsageAny)
	server := issue(t, "ratedb", ca, false, x509.ExtKeyUsageServerAuth)
	client := issue(t, "envoy", ca, false, x509.ExtKeyUsageClientAuth)
	writePEM(t, filepath.Join(dir, "ca.pem"), ca, false)
	writePEM(t, filepath.Join(dir, "server.pem"), server, true)

	p := startProc(t, filepath.Join(t.TempDir(), "state.db"), "--envoy-config", configDir(t),
		"--grpc-tls-cert", filepath.Join(dir, "server.pem"), "--grpc-tls-key", filepath.Join(dir, "server.pem.key"),
		"--grpc-client-ca", filepath.Join(dir, "ca.pem"))
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	withCert := p.client(t, credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{client.tls}, MinVersion: tls.VersionTLS12}))
	assert.EqualValues(t, 49, remaining(call(t, withCert, "basic", 1, desc("key1", "tls")), 0))

	without := p.client(t, credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := without.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "basic", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("key1", "tls")}})
	assert.Error(t, err, "a client without a certificate is refused")
}
