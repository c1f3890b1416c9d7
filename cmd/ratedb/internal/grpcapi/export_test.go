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
