//go:build !unix

package envoyconf

// openFlags: see openflags_unix.go; other systems have no fifo to fear
// (Windows' named pipes live in their own namespace).
const openFlags = 0
