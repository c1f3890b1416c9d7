package envoyconf

import "errors"

// ErrInvalidConfig is returned (wrapped, with the file name and the reason)
// when a configuration file is not valid: bad YAML, an unknown or
// non-string key, an empty domain or key, a duplicate domain or descriptor,
// an invalid unit, an invalid replaces entry, or a rate_limit name that is
// not UTF-8 (a YAML !!binary value) on a limit that is not unlimited. Use
// errors.Is.
var ErrInvalidConfig = errors.New("envoyconf: invalid config")

// ErrNoFiles is returned by Load when a directory holds no file, in none
// of its subdirectories.
var ErrNoFiles = errors.New("envoyconf: no config files")
