package fileread

import "errors"

// ErrTooLarge is returned (wrapped, with the file's path) by ReadFile for a
// file of more than MaxSize bytes. Use errors.Is.
var ErrTooLarge = errors.New("fileread: file larger than 16 MiB (16777216 bytes)")
