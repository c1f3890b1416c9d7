//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package ratedb

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// lockFile takes the same exclusive flock bbolt takes, so the file can be
// validated while no other handle writes it. It waits up to timeout and
// returns ErrLocked after that.
func lockFile(path string, timeout time.Duration) (unlock func(), err error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("ratedb: locking file: %w", err)
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, ErrLocked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// oNonBlock is the open flag that keeps opening a named pipe from blocking.
const oNonBlock = syscall.O_NONBLOCK
