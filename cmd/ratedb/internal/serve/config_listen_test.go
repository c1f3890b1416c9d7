package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// --http and --grpc clash when they would take the same port: the same
// fixed port, compared as a number, on the same host or with either on
// every interface. Port 0, however written, is a free port for each.
func TestSameListenAddr(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want bool
	}{
		{"same string", ":8080", ":8080", true},
		{"same host and port", "127.0.0.1:8080", "127.0.0.1:8080", true},
		{"leading zero", ":8080", ":08080", true},
		{"leading zeros on both", "127.0.0.1:008080", "127.0.0.1:08080", true},
		{"empty host and 0.0.0.0", ":8080", "0.0.0.0:8080", true},
		{"empty host and ::", ":8080", "[::]:8080", true},
		{"empty host and a specific one", ":8080", "127.0.0.1:8080", true},
		{"a specific host and 0.0.0.0", "127.0.0.1:8080", "0.0.0.0:8080", true},
		{":: and an IPv4 host", "[::]:8080", "127.0.0.1:8080", true},
		{"0.0.0.0 and an IPv6 host", "0.0.0.0:8080", "[::1]:8080", true},
		{"IPv6 written two ways", "[::1]:8080", "[0:0:0:0:0:0:0:1]:8080", true},
		{"IPv4-mapped IPv6", "[::ffff:127.0.0.1]:8080", "127.0.0.1:8080", true},
		{"same name in another case", "LocalHost:8080", "localhost:8080", true},
		{"service name and its number", ":http", ":80", true},

		{"port 0", ":0", ":0", false},
		{"port 0 written 00", ":00", ":00", false},
		{"port 0 two ways", "127.0.0.1:0", "127.0.0.1:000", false},
		{"other ports", ":8080", ":8081", false},
		{"distinct IPv4 hosts", "127.0.0.1:8080", "127.0.0.2:8080", false},
		{"IPv4 and IPv6 loopback", "127.0.0.1:8080", "[::1]:8080", false},
		{"a name and an address: no look-up", "localhost:8080", "127.0.0.1:8080", false},
		{"grpc not given", ":8080", "", false},
		{"both empty", "", "", false},
		{"no port", "127.0.0.1", "127.0.0.1", false},
		{"port out of range", ":65536", ":65536", false},
		{"unknown service", ":no-such-service", ":no-such-service", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, sameListenAddr(tc.a, tc.b), "%q, %q", tc.a, tc.b)
			assert.Equal(t, tc.want, sameListenAddr(tc.b, tc.a), "%q, %q", tc.b, tc.a)
		})
	}
}

// validate names both addresses when they are written differently, and
// the one address, as before, when they are the same string.
func TestValidateNamesClashingListenAddrs(t *testing.T) {
	c := Config{HTTP: ":8080", SnapshotPeriod: minSnapshotPeriod, ShutdownTimeout: 1}
	c.Envoy.GRPC = "0.0.0.0:08080"
	assert.ErrorContains(t, c.validate(), "--http :8080 and --grpc 0.0.0.0:08080 would listen on the same port: give each its own port")
	c.Envoy.GRPC = ":8080"
	assert.ErrorContains(t, c.validate(), "--http and --grpc are both :8080: give each its own port")
	c.Envoy.GRPC = "127.0.0.2:8080"
	c.HTTP = "127.0.0.1:8080"
	assert.NotContains(t, errString(c.validate()), "same port")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
