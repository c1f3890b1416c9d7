//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package layout

import (
	"bytes"
	"io"
	"os"
	"syscall"
)

// Mapped returns a reader of the first size bytes of f that reads them
// through a read-only memory map, and the function that unmaps it. CheckTree
// reads one page header after another; through a map they cost a page
// fault, mostly served by the kernel's fault-around, instead of a system
// call each: 35 to 75 ms instead of about 120 for 150,000 pages on the test
// machine. If the map fails, the reader is f itself.
//
// A fault while reading the map (the file truncated under it) is a SIGBUS:
// read it where debug.SetPanicOnFault turns that into a panic, and recover.
func Mapped(f *os.File, size int64) (io.ReaderAt, func()) {
	if size <= 0 || int64(int(size)) != size {
		return f, func() {}
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return f, func() {}
	}
	return bytes.NewReader(b), func() { _ = syscall.Munmap(b) }
}
