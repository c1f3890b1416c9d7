// Package fileread reads the files `ratedb serve` is given by its flags (API
// keys, rules, TLS certificates and keys) with a bound on their size: a flag
// naming a huge file or a device by mistake (--api-keys-file /dev/zero)
// ends the start with an error instead of reading until memory runs out.
package fileread

import (
	"fmt"
	"io"
	"os"
)

// MaxSize is the largest file ReadFile reads, in bytes: 16 MiB, far more
// than any keys, rules or PEM file holds (an Envoy config file has the same
// bound).
const MaxSize = 16 << 20

// ReadFile returns the contents of the file at path, as os.ReadFile does,
// or an error wrapping ErrTooLarge, naming path, when it holds more than
// MaxSize bytes: it reads at most MaxSize+1 bytes. Safe for concurrent use.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	return b, nil
}
