package fileread

import "errors"

// ErrTooLarge is returned (wrapped, with the file's path) by ReadFile for a
// file of more than MaxSize bytes. Use errors.Is.
var ErrTooLarge = errors.New("fileread: file larger than 16 MiB (16777216 bytes)")

// ErrNotRegular is returned (wrapped, with the file's path and what it is:
// a directory, a named pipe (FIFO), a character or block device, a socket)
// by ReadFile for a path that is neither a regular file nor a symbolic link
// to one. Use errors.Is.
var ErrNotRegular = errors.New("fileread: not a regular file")
