//go:build !unix

package proctest

import "os"

// stopSignal is nil without SIGSTOP: StartStoppedRedis skips.
var stopSignal os.Signal
