//go:build !unix

package fileread

// openFlags: see openflags_unix.go; other systems have no named pipe in
// the file system to fear (Windows' live in their own namespace).
const openFlags = 0
