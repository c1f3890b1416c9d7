package fileread

import (
	"errors"
	"fmt"
)

// ErrTooLarge is matched by the error ReadFile returns for a file of more
// than MaxSize bytes (which reads "PATH: " and then ErrTooLarge's own
// message), and by ReadFileLimit's for a file above its limit (whose message
// states that limit instead). Use errors.Is.
var ErrTooLarge = errors.New("fileread: file larger than 16 MiB (16777216 bytes)")

// tooLargeError is the error for the file at path, of more than limit
// bytes. It matches ErrTooLarge.
type tooLargeError struct {
	path  string
	limit int
}

func (e *tooLargeError) Error() string {
	size := fmt.Sprintf("%d bytes", e.limit)
	if e.limit%(1<<20) == 0 {
		size = fmt.Sprintf("%d MiB (%s)", e.limit>>20, size)
	}
	return fmt.Sprintf("%s: fileread: file larger than %s", e.path, size)
}

// Is reports whether target is ErrTooLarge.
func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ErrNotRegular is returned (wrapped, with the file's path and what it is:
// a directory, a named pipe (FIFO), a character or block device, a socket)
// by ReadFile for a path that is neither a regular file nor a symbolic link
// to one. Use errors.Is.
var ErrNotRegular = errors.New("fileread: not a regular file")
