//go:build unix

package redisstore_test

import (
	"os"
	"syscall"
)

// sigStop and sigCont pause and continue a redis-server (server.Pause).
var sigStop, sigCont os.Signal = syscall.SIGSTOP, syscall.SIGCONT
