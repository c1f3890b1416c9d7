package ratedb

import (
	"sync/atomic"
	"time"
)

// Stats is a point-in-time view of a DB's activity, from DB.Stats. Counters
// count since Open.
type Stats struct {
	// WindowsInMemory is the number of windows in memory: those the cache
	// holds, plus cold ones waiting to be written (with a file) or living in
	// the in-memory cold store (without one).
	WindowsInMemory int64
	// WindowsOnDisk is the number of windows in the file, as of the last
	// commit (a damaged block's windows count until a write replaces or
	// deletes it). 0 in memory-only mode.
	WindowsOnDisk int64
	// Allowed and Denied count Hit decisions.
	Allowed int64
	Denied  int64
	// Snapshots counts snapshots that committed changes; SnapshotFailures
	// counts snapshots whose write failed (their windows stay dirty and are
	// retried by the next one), and, once the DB has stopped writing its
	// file (a damaged file it could not rebuild, or one the check after
	// Open could not read: see the package documentation), every snapshot,
	// even one with nothing to write.
	Snapshots        int64
	SnapshotFailures int64
	// LastSnapshotDuration, LastSnapshotWindows and LastSnapshotBytes
	// describe the last completed snapshot: how long it took, how many
	// changed windows it wrote or deleted, and how many bytes of blocks
	// (bbolt keys and values) it wrote.
	LastSnapshotDuration time.Duration
	LastSnapshotWindows  int64
	LastSnapshotBytes    int64
	// LastSnapshotError is the error of the last failed snapshot, nil if the
	// last snapshot succeeded.
	LastSnapshotError error
	// Spilled counts windows the cache evicted or declined; they were kept
	// as cold entries or written to the file. Reloaded counts windows read
	// back from the file on use.
	Spilled  int64
	Reloaded int64
	// Cleaned counts windows the janitor removed, each once. A window a
	// pass took out of memory but whose record it then failed to delete
	// from the file (a full disk) is counted by the pass that deletes the
	// record instead; not at all if, before that, a call brings it back
	// from the file and replaces it with a new window or clears it (a hit,
	// Inc or Set; a Reset: as an ended window such a call replaces or
	// clears in memory is not counted); and twice only if the failed pass
	// could not even read the file to tell.
	Cleaned int64
	// CorruptSkipped counts reads of a block of windows that failed
	// validation and was ignored (by a look-up, a snapshot or the janitor,
	// which replace or delete it), and records of a file of format ratedb/1
	// its migration dropped, plus one if Open found one of the file's two
	// meta pages damaged and opened at the other one's (previous) commit,
	// plus, if the page audit after Open rebuilt the file, its damaged pages
	// and the blocks the rebuild left out.
	CorruptSkipped int64
	// JanitorFailures counts janitor passes that failed to clean the file:
	// the background ones and those run by Clean, as SnapshotFailures
	// counts both kinds of snapshot.
	JanitorFailures int64
	// SnapshotBacklog is the number of window changes not yet written to
	// the file: windows changed since the last snapshot took them, plus
	// those a snapshot is writing and has not committed yet. A changed
	// window the janitor removes (it has expired: the file need not get
	// its change) leaves it at once. Hot windows' changes count too, so it
	// can exceed Options.MaxSnapshotBacklog, which bounds the windows in
	// memory beyond MaxHotKeys. 0 in memory-only mode.
	SnapshotBacklog int64
	// BacklogWaits counts calls that found memory holding MaxHotKeys +
	// MaxSnapshotBacklog windows and waited for a snapshot to write some
	// before bringing a window into memory (see Options.MaxSnapshotBacklog).
	BacklogWaits int64
	// FileReadsAvoided counts look-ups of windows in the file (a key's
	// first use since it left memory, or ever) that the presence filter
	// answered without reading the file: no window of that key is there.
	// PresenceFilterBytes is the size of that filter, in bytes: at least
	// 8 KiB, and beyond that 1.5 to 6 bytes per window the file held when
	// it was built (and as much again while a new one is built); 0 until
	// the first is built after Open, after a rebuild of a damaged file,
	// and in memory-only mode.
	FileReadsAvoided    int64
	PresenceFilterBytes int64
	// CacheReportsDropped counts uses that did not reach the cache's
	// frequency sketch because the goroutine that passes them on was 16
	// batches of 512 behind, as happens in a process short of CPU: sampled
	// uses of hot windows (one in 16 uses of each), and uses of cold windows
	// that were not offered to the cache (a new window's first use while the
	// cache is full). Admission then weighs those windows by fewer uses; no
	// count is affected.
	CacheReportsDropped int64
}

// counters are the DB's internal Stats counters.
type counters struct {
	snapshots, snapshotFailures       atomic.Int64
	lastSnapDur, lastSnapN, lastSnapB atomic.Int64
	lastSnapErr                       atomic.Pointer[error]
	spilled, reloaded, cleaned        atomic.Int64
	corrupt, janitorFailures          atomic.Int64
	diskWindows                       atomic.Int64
	backlog, backlogWaits             atomic.Int64
	readsAvoided, presenceBytes       atomic.Int64
}

// Stats returns the DB's counters. It is cheap and safe to call at any time,
// also after Close.
func (db *DB) Stats() Stats {
	s := Stats{
		WindowsInMemory:      db.memWindows.Load(),
		WindowsOnDisk:        db.stats.diskWindows.Load(),
		Snapshots:            db.stats.snapshots.Load(),
		SnapshotFailures:     db.stats.snapshotFailures.Load(),
		LastSnapshotDuration: time.Duration(db.stats.lastSnapDur.Load()),
		LastSnapshotWindows:  db.stats.lastSnapN.Load(),
		LastSnapshotBytes:    db.stats.lastSnapB.Load(),
		Spilled:              db.stats.spilled.Load(),
		Reloaded:             db.stats.reloaded.Load(),
		Cleaned:              db.stats.cleaned.Load(),
		CorruptSkipped:       db.stats.corrupt.Load(),
		JanitorFailures:      db.stats.janitorFailures.Load(),
		SnapshotBacklog:      db.stats.backlog.Load(),
		BacklogWaits:         db.stats.backlogWaits.Load(),
		FileReadsAvoided:     db.stats.readsAvoided.Load(),
		PresenceFilterBytes:  db.stats.presenceBytes.Load(),
		CacheReportsDropped:  db.reports.dropped.Load(),
	}
	if p := db.stats.lastSnapErr.Load(); p != nil {
		s.LastSnapshotError = *p
	}
	for i := range db.shards {
		s.Allowed += db.shards[i].allowed.Load()
		s.Denied += db.shards[i].denied.Load()
	}
	return s
}
