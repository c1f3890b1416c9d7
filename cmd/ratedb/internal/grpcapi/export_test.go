package grpcapi

import (
	"testing"
	"time"
)

// SetRecvTimeout makes the servers that NewGRPCServer returns until the
// test ends wait d, instead of RecvTimeout, for a call's message.
func SetRecvTimeout(t testing.TB, d time.Duration) {
	old := recvTimeout
	recvTimeout = d
	t.Cleanup(func() { recvTimeout = old })
}

// SetIdleTimeout makes the servers that NewGRPCServer returns until the
// test ends close connections idle for d, instead of IdleTimeout.
func SetIdleTimeout(t testing.TB, d time.Duration) {
	old := idleTimeout
	idleTimeout = d
	t.Cleanup(func() { idleTimeout = old })
}
