//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package ratedb

import "time"

// lockFile is a no-op where flock is unavailable; bbolt's own lock still
// guards the file.
func lockFile(path string, timeout time.Duration) (unlock func(), err error) {
	return func() {}, nil
}

// oNonBlock is the open flag that keeps opening a named pipe from blocking.
const oNonBlock = 0
