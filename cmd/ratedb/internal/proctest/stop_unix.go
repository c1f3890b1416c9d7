//go:build unix

package proctest

import (
	"os"
	"syscall"
)

// stopSignal stops a process without ending it (StartStoppedRedis).
var stopSignal os.Signal = syscall.SIGSTOP
