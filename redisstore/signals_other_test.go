//go:build !unix

package redisstore_test

import "os"

// Without SIGSTOP a redis-server cannot be paused: server.Pause skips.
var sigStop, sigCont os.Signal
