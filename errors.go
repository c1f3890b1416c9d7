package ratedb

import (
	"errors"

	"github.com/ratedb/ratedb/internal/limits"
)

// Errors returned by ratedb. Match them with errors.Is: most are wrapped with
// the detail of what went wrong.
var (
	// ErrClosed is returned by every operation on a DB (or on a Window or
	// Layered limiter of that DB) after Close has begun, and by a second Close.
	ErrClosed = errors.New("ratedb: database is closed")

	// ErrInvalidArgument is returned, wrapped with what was wrong, for an
	// empty or oversized key, a scale under one millisecond or not a whole
	// number of milliseconds, an unknown algorithm, a negative limit or count,
	// a non-positive increment, a nil context, or an invalid Options field.
	// A call that returns it changes nothing.
	ErrInvalidArgument = limits.ErrInvalidArgument

	// ErrLocked is returned by Open when another DB handle (in this process or
	// another one) still holds the file's lock after Options.OpenTimeout.
	ErrLocked = errors.New("ratedb: database file is locked by another handle")

	// ErrCorrupt is returned by Open for a file that is not a ratedb database
	// or fails validation (truncated, zero bytes, garbage, a foreign bbolt
	// file), and by operations that meet a damaged page while reading or
	// writing. A single record that fails its checksum is not an error: it is
	// skipped and counted in Stats.CorruptSkipped.
	ErrCorrupt = errors.New("ratedb: database file is corrupt")

	// ErrUnavailable is returned by a network-backed limiter (such as
	// redisstore) when its store cannot be reached or does not answer within
	// its timeout. No decision was made: whether to allow or deny the request
	// (fail open or closed) is the caller's choice. The embedded DB never
	// returns it.
	ErrUnavailable = errors.New("ratedb: store unavailable")
)
