package ratedb

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Options configures a DB. The zero value of every field selects its default;
// pass nil to Open for all defaults. Open copies the Options: changing them
// afterwards has no effect.
type Options struct {
	// CleanPeriod is how often the background janitor removes expired
	// windows from memory and from the file. Default 1 minute. Negative
	// disables the background janitor; DB.Clean still works.
	CleanPeriod time.Duration

	// KeyOlderThan is how long past its end an expired window is kept before
	// the janitor removes it. Default 0: an expired window carries no
	// information (the next hit opens a fresh one either way), so it is
	// removed by the first janitor pass at or after its end. A positive
	// value keeps expired windows around, for example to inspect them: a
	// window ending at E is removed, from memory and file, by the first pass
	// at or after E+KeyOlderThan. It must be a whole number of milliseconds;
	// negative is invalid.
	KeyOlderThan time.Duration

	// SnapshotPeriod is how often windows changed since the last snapshot are
	// written to the file. It bounds what a crash can lose. Default 1 second.
	// Negative disables periodic snapshots; DB.Snapshot and Close still write.
	// Ignored in memory-only mode.
	SnapshotPeriod time.Duration

	// MaxHotKeys is how many windows the in-memory cache holds, in windows.
	// Colder windows are written to the file and reloaded on their next hit
	// (in memory-only mode they stay in a plain map). Default 1<<20; at most
	// MaxHotKeysLimit (1<<26), larger or negative is invalid. A hot window
	// costs about 400 bytes in all, as measured in the README's Performance
	// section: about 50 bytes of it allocated by Open up front for every
	// hot key (the cache's frequency sketch: 50 MB at the default), the rest
	// (the window, the index, the cache's maps and a lookup table that
	// grows with them, to at most about 19 bytes a hot key) as windows
	// arrive.
	MaxHotKeys int64

	// MaxSnapshotBacklog bounds memory beyond the hot set, in windows.
	// With a file, a window the cache does not hold stays in memory only
	// until a snapshot has written its last change; new keys arriving
	// faster than the file takes them (a flood of spoofed addresses or
	// random API keys) would grow that backlog without bound. A call that
	// would bring a window into memory (open a new one, or reload one from
	// the file) therefore first waits while memory holds MaxHotKeys +
	// MaxSnapshotBacklog windows: it runs a snapshot itself, or waits for
	// the running one to commit a batch. So
	//
	//	WindowsInMemory <= MaxHotKeys + MaxSnapshotBacklog + calls in progress
	//
	// and memory is about that many windows times the bytes per window,
	// plus what a snapshot's transaction holds while it writes (about 16 MiB
	// of blocks and bbolt's copies of the pages they touch), what grows with
	// the file (the presence filter, 1.5 to 6 bytes a window in it, and the
	// index of its blocks) and Go's heap headroom (README,
	// "Under a flood of new keys"). Calls on windows already in memory never
	// wait, and a waiting call is slower, never wrong; if the snapshot it runs fails,
	// it returns that error and counts nothing. Under a sustained flood,
	// hits on new keys are served at the rate the file takes new windows,
	// and one such hit in about every MaxSnapshotBacklog waits for a whole
	// snapshot (see Stats.BacklogWaits and Stats.SnapshotBacklog). Default
	// 1<<18 (262,144). Negative is invalid; math.MaxInt64 means no bound.
	// Ignored in memory-only mode, where every window stays in memory.
	MaxSnapshotBacklog int64

	// Clock is the time source. It is read once per call on a key (twice
	// by a Refund, an Undo, or a Hit whose increment exceeds its limit,
	// when the call finds the key's window open: once to look at it, once
	// to change it) and once per janitor pass. Default: the
	// wall clock read once at Open, plus Go's monotonic time elapsed since,
	// so that a step of the wall clock while the DB is open changes nothing;
	// a goroutine stores it every millisecond while the DB is in use (and
	// sleeps after a second without calls), which costs an atomic load
	// instead of a clock read per call; under heavy load it can lag by a few
	// milliseconds. An injected clock (tests) is taken as given, reading by
	// reading. Time granularity is the millisecond. Whatever the clock does,
	// a window never ends more than one scale after now: see the package
	// documentation for the glitch cases. A reading before
	// 1970-01-01T00:00:00Z or at or after 10000-01-01T00:00:00Z gives
	// ErrClockOutOfRange. The clock is called with the key's lock held, so
	// that a call's time is never older than a janitor pass it follows: it
	// must be fast and must not call the DB. It is called concurrently (by
	// calls on different keys, and by the janitor), so it must be safe for
	// concurrent use: a fake clock guards its reading with a mutex or an
	// atomic.
	Clock func() time.Time

	// OpenTimeout is how long Open waits in all for another handle's lock
	// on the file before it returns ErrLocked. Default 1 second. Negative
	// is invalid. Unused in memory-only mode.
	OpenTimeout time.Duration

	// Logger receives snapshot and janitor failures, corrupt-file
	// recovery, and one Info line when Open migrates a file of format
	// ratedb/1. Default slog.Default(). Keys are never logged.
	Logger *slog.Logger

	// OnCorrupt says what Open does with a file that fails validation.
	// Default CorruptFail; a value other than CorruptFail and
	// CorruptMoveAside is invalid. Unused in memory-only mode.
	//
	// Damage found after Open, by the check of every page's structure that
	// runs in the background before anything writes to the file, is
	// repaired whatever OnCorrupt says: the file is rebuilt from its sound
	// blocks of windows, the damaged one kept as "<path>.corrupt-<unix-ms>", and the
	// loss logged and counted in Stats.CorruptSkipped.
	OnCorrupt CorruptPolicy

	// NoSync skips fsync at each snapshot commit. A process crash still loses
	// nothing more than without it; a power loss or kernel crash can lose
	// more, or damage the file. Default false. Ignored in memory-only mode.
	NoSync bool
}

// CorruptPolicy is what Open does with a file that fails validation.
type CorruptPolicy int

const (
	// CorruptFail makes Open return an error wrapping ErrCorrupt.
	CorruptFail CorruptPolicy = iota
	// CorruptMoveAside renames the bad file to "<path>.corrupt-<unix-ms>",
	// logs an error, and starts with an empty database. Counts in the bad
	// file are lost. A file Open cannot read (an I/O error, not ErrCorrupt)
	// is not moved: Open returns the error.
	CorruptMoveAside
)

// MaxHotKeysLimit is the largest Options.MaxHotKeys: 1<<26 (67,108,864)
// windows, for which Open allocates about 3.3 GB up front.
const MaxHotKeysLimit = 1 << 26

// upfrontBytes estimates what a cache of maxHot windows allocates before
// its windows: the cache's frequency sketch and doorkeeper (about 48 bytes
// per window, measured at the default, allocated by Open) and the fast
// table at its largest (about 18 bytes a window, see fastTableSize; it
// grows to that with the windows in memory). It is a float64 so that no
// value of maxHot overflows it.
func upfrontBytes(maxHot int64) float64 {
	return 48*float64(maxHot) + fastBytes(fastTableSize(min(maxHot, MaxHotKeysLimit)))
}

// formatBytes formats n bytes in decimal units.
func formatBytes(n float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	i := 0
	for n >= 1000 && i < len(units)-1 {
		n /= 1000
		i++
	}
	return fmt.Sprintf("%.3g %s", n, units[i])
}

// Defaults of Options, used for a field left at zero.
const (
	// DefaultCleanPeriod is Options.CleanPeriod's default.
	DefaultCleanPeriod = time.Minute
	// DefaultSnapshotPeriod is Options.SnapshotPeriod's default.
	DefaultSnapshotPeriod = time.Second
	// DefaultMaxHotKeys is Options.MaxHotKeys's default, in windows.
	DefaultMaxHotKeys = 1 << 20
	// DefaultOpenTimeout is Options.OpenTimeout's default.
	DefaultOpenTimeout = time.Second

	// DefaultMaxSnapshotBacklog is Options.MaxSnapshotBacklog's default,
	// in windows.
	DefaultMaxSnapshotBacklog = 1 << 18
)

// withDefaults returns a copy of o (nil means all defaults) with every zero
// field set to its default.
func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.CleanPeriod == 0 {
		c.CleanPeriod = DefaultCleanPeriod
	}
	if c.SnapshotPeriod == 0 {
		c.SnapshotPeriod = DefaultSnapshotPeriod
	}
	if c.MaxHotKeys == 0 {
		c.MaxHotKeys = DefaultMaxHotKeys
	}
	if c.MaxSnapshotBacklog == 0 {
		c.MaxSnapshotBacklog = DefaultMaxSnapshotBacklog
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate reports every invalid field at once.
func (o *Options) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...))
	}
	if o.KeyOlderThan < 0 {
		bad("Options.KeyOlderThan %v is negative", o.KeyOlderThan)
	}
	if o.KeyOlderThan%time.Millisecond != 0 {
		bad("Options.KeyOlderThan %v is not a whole number of milliseconds", o.KeyOlderThan)
	}
	if o.MaxHotKeys < 0 {
		bad("Options.MaxHotKeys %d is negative", o.MaxHotKeys)
	}
	if o.MaxHotKeys > MaxHotKeysLimit {
		bad("Options.MaxHotKeys %d is over its maximum %d: it would allocate about %s up front",
			o.MaxHotKeys, MaxHotKeysLimit, formatBytes(upfrontBytes(o.MaxHotKeys)))
	}
	if o.MaxSnapshotBacklog < 0 {
		bad("Options.MaxSnapshotBacklog %d is negative", o.MaxSnapshotBacklog)
	}
	if o.OpenTimeout < 0 {
		bad("Options.OpenTimeout %v is negative", o.OpenTimeout)
	}
	if o.OnCorrupt != CorruptFail && o.OnCorrupt != CorruptMoveAside {
		bad("Options.OnCorrupt %d is unknown", int(o.OnCorrupt))
	}
	return errors.Join(errs...)
}
