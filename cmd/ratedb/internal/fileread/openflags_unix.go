//go:build unix

package fileread

import "syscall"

// openFlags open a file without waiting: a named pipe put in place of a
// file after ReadFile checked it would otherwise block the open until some
// process opened it for writing. (On a regular file the flag changes
// nothing.)
const openFlags = syscall.O_NONBLOCK
