// Package fileread reads the files `ratedb serve` is given by its flags (API
// keys, rules, TLS certificates and keys), and the rules file it keeps
// beside its state file (with a bound of its own): only a regular file, or
// a symbolic link to one, and with a bound on its size. A flag naming a named
// pipe (FIFO) or a device by mistake ends the start at once with an error
// saying so, instead of blocking on the open of a FIFO nothing writes to or
// reading a device until the bound; a huge file ends it instead of being
// read until memory runs out.
package fileread

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// MaxSize is the largest file ReadFile reads, in bytes: 16 MiB, far more
// than any keys, rules or PEM file holds (an Envoy config file has the same
// bound).
const MaxSize = 16 << 20

// testBeforeOpen, when set by a test, runs between ReadFile's check of the
// file's status and its open.
var testBeforeOpen func(path string)

// ReadFile returns the contents of the file at path, as os.ReadFile does,
// when path is a regular file, or a symbolic link to one (as the files of a
// Kubernetes Secret or ConfigMap volume are), of at most MaxSize bytes.
// Otherwise it returns an error naming path: one wrapping ErrNotRegular,
// saying what the file is, for a directory, a named pipe (FIFO), a device
// or a socket; one matching ErrTooLarge for a larger file; the os error
// (fs.ErrNotExist, fs.ErrPermission) for a path it cannot stat or open. It
// never opens a file whose status shows it is not regular, never blocks on
// a named pipe (not even one put in place of the file after that check),
// and reads at most MaxSize+1 bytes. Safe for concurrent use.
func ReadFile(path string) ([]byte, error) { return ReadFileLimit(path, MaxSize) }

// ReadFileLimit is ReadFile with a bound of limit bytes (positive) instead
// of MaxSize, for a file that may legitimately be larger: for a file of
// more than limit bytes, its error names path, states limit and matches
// ErrTooLarge (errors.Is). It reads at most limit+1 bytes, and none from a
// file whose status already shows it is larger. Safe for concurrent use.
func ReadFileLimit(path string, limit int) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regular(path, fi); err != nil {
		return nil, err
	}
	if testBeforeOpen != nil {
		testBeforeOpen(path)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The status of the file opened, which path may no longer name: it may
	// have been replaced since the check above, by a named pipe too.
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := regular(path, fi); err != nil {
		return nil, err
	}
	if fi.Size() > int64(limit) {
		return nil, &tooLargeError{path: path, limit: limit}
	}
	// The file may grow while it is read: the bound holds still.
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, &tooLargeError{path: path, limit: limit}
	}
	return b, nil
}

// regular returns nil if fi, the status of path, is a regular file's, or
// an error wrapping ErrNotRegular that names path and says what it is.
func regular(path string, fi fs.FileInfo) error {
	m := fi.Mode()
	if m.IsRegular() {
		return nil
	}
	var what string
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	default:
		what = "a file of mode " + m.String()
	}
	return fmt.Errorf("%s: %w: it is %s", path, ErrNotRegular, what)
}
