package ratedb

import (
	"errors"

	"github.com/ratedb/ratedb/internal/limits"
)

// Errors returned by ratedb. Match them with errors.Is: most are wrapped with
// the detail of what went wrong.
var (
	// ErrClosed is returned by every operation on a DB (or on a Window or
	// Layered limiter of that DB) after Close has begun, and by a second
	// Close, whatever the call's arguments: it is checked before them, so a
	// call with an invalid argument or an ended context returns ErrClosed,
	// not ErrInvalidArgument or the context's error.
	ErrClosed = errors.New("ratedb: database is closed")

	// ErrInvalidArgument is returned, wrapped with what was wrong, for an
	// empty or oversized key, a scale under one millisecond or not a whole
	// number of milliseconds, an unknown algorithm, a negative limit or count,
	// a non-positive increment or refund amount, an Inc whose increment would
	// overflow the count (past 1<<63-1), an Undo of a Result its limiter
	// cannot have given (of another scale or scales, a Layered Result on a
	// Window or the reverse; a Result of another limiter with the same
	// scales is not detected), a Layered limiter with no tier or more than
	// 16, a nil
	// context, or an invalid Options field, on a DB that is open (see
	// ErrClosed). A call that returns it changes nothing.
	//
	// A call given a context that is already cancelled or past its deadline
	// returns the context's error (context.Canceled or
	// context.DeadlineExceeded; ErrClosed once Close has begun) and changes
	// nothing. The embedded DB checks
	// the context only as a call begins: a context ending during a call
	// does not interrupt it, not even one that waits for a snapshot to make
	// room in memory (see Options.MaxSnapshotBacklog).
	ErrInvalidArgument = limits.ErrInvalidArgument

	// ErrLocked is returned by Open when another DB handle (in this process or
	// another one) still holds the file's lock after Options.OpenTimeout.
	ErrLocked = errors.New("ratedb: database file is locked by another handle")

	// ErrCorrupt is returned by Open for a file that is not a ratedb database
	// or fails validation (truncated, zero bytes, garbage, a foreign bbolt
	// file), by operations that meet a damaged page while reading or
	// writing, and, once the page audit after Open found damaged pages and
	// could not rebuild the file, by every snapshot, Clean and Close. A block of
	// windows that fails its checksum (about 30 windows, see File in the
	// package documentation; in a file of format ratedb/1 that Open
	// migrates, a single record) is not an error: it is skipped, its
	// windows read as fresh ones, and counted in Stats.CorruptSkipped. A
	// read of the file that Open's validation makes through its own reads
	// and that fails (an I/O error such as EIO) is not ErrCorrupt either:
	// Open returns that error, wrapped, and Options.OnCorrupt does not move
	// the file aside. (bbolt reads through a memory map, where a failed read
	// is a fault that cannot be told from damage: that remains ErrCorrupt.)
	ErrCorrupt = errors.New("ratedb: database file is corrupt")

	// ErrNotRegularFile is returned, wrapped with what the path is, by Open
	// for a path that exists but is not a regular file: a directory, a named
	// pipe (FIFO), a device, a socket, or a symbolic link that resolves to one
	// of those. Open returns it at once, whatever Options.OnCorrupt says, and
	// renames, creates and writes nothing.
	ErrNotRegularFile = errors.New("ratedb: path is not a regular file")

	// ErrClockOutOfRange is returned, wrapped with the reading, when the clock
	// reads before 1970-01-01T00:00:00Z or at or after
	// 10000-01-01T00:00:00Z: by Open for the system clock, and by every call
	// that reads the clock for Options.Clock. The call changes nothing.
	ErrClockOutOfRange = errors.New("ratedb: clock reading out of range")

	// ErrUnavailable is returned by a network-backed limiter (such as
	// redisstore) when its store cannot be reached, does not answer within
	// its timeout, or answers with an error (for redisstore, also a key
	// holding a value it did not write). No decision was made: whether to
	// allow or deny the request (fail open or closed) is the caller's
	// choice. The embedded DB never returns it.
	ErrUnavailable = errors.New("ratedb: store unavailable")
)
