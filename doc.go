// Package ratedb is an embeddable fixed-window rate limiter whose counts
// survive process restarts.
//
// Windows are counted in memory, at in-memory speed, and the windows that
// changed are written periodically to a bbolt file, so "100 requests per
// minute per user" keeps counting across a deploy or a crash:
//
//	db, err := ratedb.Open("limits.db", nil)
//	...
//	perMinute, err := db.Window(ratedb.PerKeyWindow, time.Minute)
//	r, err := perMinute.Hit(ctx, "user:42", 100, 1)
//	if !r.Allowed { /* 429, retry after r.RetryAfter */ }
//
// # Algorithms
//
// FixedWindow aligns every key's windows to multiples of the scale since the
// Unix epoch; PerKeyWindow starts a key's window at its first allowed hit;
// StaggeredWindow is FixedWindow shifted per key by a stable hash, so keys do
// not all reset at once. A denied hit counts nothing, so a client that keeps
// hammering a denied key does not deepen its own penalty. Layered limits a
// key by several windows at once, all or nothing.
//
// # Guarantees
//
// Exactness: with any number of goroutines hitting one key, exactly limit
// hits of increment 1 are allowed per window. Evictions from the in-memory
// cache, snapshots, janitor passes and restarts never lose a live window or
// count a hit twice.
//
// Durability: a Close that returns nil loses nothing; one whose final
// snapshot fails (a full disk, say) returns that error, and the changes
// since the last completed snapshot are lost, as in a crash. A crash
// (SIGKILL, power loss) loses at most the hits admitted since the last
// completed snapshot began; by default snapshots run every second, and
// right after Open the first one also waits for the page audit (see
// Damaged files). Nothing is ever counted twice. After a crash a key can
// therefore be allowed up to limit plus the hits lost in that window.
//
// File: windows are packed into blocks of about 30, ordered by a keyed hash
// of their keys (format ratedb/2; a file of format ratedb/1 is migrated by
// Open in one transaction). A snapshot rewrites the blocks its changed
// windows fall in. The crash bound above holds as it did with one record per
// window: a block commits with its snapshot's transaction.
//
// Damaged files: every block carries a version and a CRC-32C over its bbolt
// key and its windows; a damaged block is skipped (its windows start fresh)
// and counted in Stats.CorruptSkipped. A file that cannot be opened safely
// gives ErrCorrupt (or, with CorruptMoveAside, is moved aside). bbolt does
// not checksum its data pages: before anything writes to the file, a
// background pass after Open checks the structure of every page and, if one
// is damaged, rebuilds the file from its sound blocks (which needs free disk
// space for a second copy). If the rebuild fails, the DB stops writing the
// file: snapshots, Clean and Close return ErrCorrupt, and counts go on in
// memory only. So it does if the pass cannot read the file (an I/O error
// such as EIO), but they then return that error, wrapped, not ErrCorrupt;
// the next Open checks the file again. Until that pass has run, a flipped byte in a branch page can
// send look-ups to the wrong page, where their keys read as fresh windows;
// DB.Verify reads the whole file and reports such damage at once.
//
// Clock: time granularity is the millisecond. The default clock reads the
// wall clock once, at Open, and then runs on Go's monotonic clock, so a step
// of the wall clock while the DB is open changes nothing; an injected
// Options.Clock is taken as given. Whatever the clock does, a window never
// ends more than one scale after now: a stored window that ends later is
// capped, when a call acquires it, to end one scale after now, keeping its
// count. So (a) a step back never reopens a window early and (b) no key is
// denied for more than one scale past the moment it would be allowed on a
// correct clock. Readings before 1970 or from the year 10000 on give
// ErrClockOutOfRange. The glitch cases:
//
//	case                                  what the DB does                           (a) early?  (b) extra denial
//	wall clock steps, DB open (default)   nothing: time runs on the monotonic clock   no          none
//	suspend and resume (default)          windows pause with the monotonic clock      no          one scale
//	wall clock behind at Open             later windows capped, counts kept           no          one scale
//	wall clock ahead at Open              as after that much downtime                 once        one scale, next run
//	injected clock steps back             later windows capped, counts kept           no          one scale
//	injected clock ahead for some calls   those calls open new windows, capped later  those calls one scale
//
// Concurrency: a DB and its Window and Layered limiters are safe for
// concurrent use. One file can be open in one DB at a time: a second Open,
// from this process or another, waits Options.OpenTimeout and returns
// ErrLocked.
//
// # Caveats
//
// A fixed window allows a burst of up to twice the limit across a window
// boundary (limit hits at the end of one window, limit more at the start of
// the next); StaggeredWindow and PerKeyWindow move that boundary per key but
// do not remove it. StaggeredWindow's offsets come from an unkeyed hash, so a
// client that chooses its key chooses its reset time (never more than limit
// per window). ratedb is for one process on one machine: it does not
// share counts between processes. With a file, memory holds at most
// MaxHotKeys + MaxSnapshotBacklog windows plus one per call in progress: when
// new windows arrive faster than snapshots write them, calls that open new
// windows wait for the file (see Options.MaxSnapshotBacklog); in memory-only
// mode every live window stays in memory. Keys are at most MaxKeyLen bytes.
// Expired windows leave memory and the file at the first janitor pass at or
// after their end plus Options.KeyOlderThan (a window a snapshot is writing,
// or whose end went down since the file last got it, capped by the clock
// model or cleared by Reset, at the first pass after the next snapshot); the
// file does not shrink when they do (bbolt reuses its free pages). Raw keys
// may be personal data: ratedb never puts
// them in errors or logs, but they are stored as-is in the file (which Open
// creates with mode 0600: protect it like any database file).
package ratedb
