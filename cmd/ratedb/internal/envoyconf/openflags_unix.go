//go:build unix

package envoyconf

import "syscall"

// openFlags open a config file without waiting: a fifo put in place of a
// file after readFile checked it would otherwise block the open until some
// process opened it for writing. (On a regular file the flag changes
// nothing.)
const openFlags = syscall.O_NONBLOCK
