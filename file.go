package ratedb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The file's layout (format ratedb/2: buckets meta and blocks, windows
// packed into blocks ordered by a keyed hash) is described in
// internal/layout; files of format ratedb/1 are migrated on Open (migrate.go).

// openFile opens (or creates) db.path and loads its metadata.
func (db *DB) openFile() error {
	if err := checkRegular(db.path, os.Stat); err != nil {
		return err
	}
	err := db.openPath()
	if err == nil || !errors.Is(err, ErrCorrupt) || db.opts.OnCorrupt != CorruptMoveAside {
		return err
	}
	// Only a regular file ratedb judged corrupt is moved, never a symbolic
	// link (the rename would move the link, not the file it judged).
	if lerr := checkRegular(db.path, os.Lstat); lerr != nil {
		return errors.Join(err, fmt.Errorf("ratedb: not moving it aside: %w", lerr))
	}
	aside := db.path + ".corrupt-" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	if rerr := os.Rename(db.path, aside); rerr != nil {
		return errors.Join(err, fmt.Errorf("ratedb: moving corrupt file aside: %w", rerr))
	}
	db.log.Error("ratedb: database file failed validation; moved it aside and started empty: its counts are lost",
		"path", db.path, "moved_to", aside, "err", err)
	return db.openPath()
}

// checkRegular returns an error wrapping ErrNotRegularFile if path exists
// and stat (os.Stat, which follows symbolic links, or os.Lstat) says it is not
// a regular file. It opens nothing, so a named pipe cannot block it.
func checkRegular(path string, stat func(string) (fs.FileInfo, error)) error {
	fi, err := stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ratedb: %w", err)
	}
	return regularFile(path, fi)
}

// regularFile returns an error wrapping ErrNotRegularFile, naming what path
// is, unless fi describes a regular file.
func regularFile(path string, fi fs.FileInfo) error {
	m := fi.Mode()
	if m.IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeSymlink != 0:
		kind = "a symbolic link"
	}
	return fmt.Errorf("%w: %s is %s", ErrNotRegularFile, path, kind)
}

// openRegular opens path read-only, without blocking where the platform
// allows (opening a named pipe blocks until a writer appears), and returns an
// error wrapping ErrNotRegularFile if it is not a regular file: the path may
// have changed since Open checked it.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNonBlock, 0)
	if err != nil {
		return nil, fmt.Errorf("ratedb: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = regularFile(path, fi)
	} else {
		err = fmt.Errorf("ratedb: %w", err)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func (db *DB) openPath() error {
	if _, err := os.Stat(db.path); errors.Is(err, fs.ErrNotExist) {
		if err := createFile(db.path); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("ratedb: %w", err)
	}

	bdb, err := db.openValidated()
	if err != nil {
		return err
	}
	db.bolt = bdb
	if err := db.loadFile(); err != nil {
		_ = bdb.Close()
		db.bolt = nil
		return err
	}
	return nil
}

// openValidated validates the file at db.path under its lock, then opens
// it with bbolt. bbolt's Open may wait for the lock of a file that another
// process then replaces (ratedb compact renames its new file over the old
// one, then lets the old one go): bbolt would then hold a file no longer at
// db.path, where every write is lost. So the file at db.path must be the
// same before and after, or it starts again (three times at most). All the
// waits for the lock share one OpenTimeout.
func (db *DB) openValidated() (*bolt.DB, error) {
	deadline := time.Now().Add(db.opts.OpenTimeout)
	// left is the wait still allowed: never zero, which bbolt reads as
	// "wait forever".
	left := func() time.Duration { return max(time.Until(deadline), time.Millisecond) }
	for attempt := 1; ; attempt++ {
		before, err := os.Stat(db.path)
		if err != nil {
			return nil, fmt.Errorf("ratedb: %w", err)
		}
		unlock, err := lockFile(db.path, left())
		if err != nil {
			return nil, err
		}
		_, metaDamaged, err := validateFile(db.path)
		unlock()
		if err != nil {
			return nil, err
		}
		if testBeforeOpenBolt != nil {
			testBeforeOpenBolt()
		}
		bdb, err := openBolt(db.path, left(), db.opts.NoSync)
		if err != nil {
			return nil, err
		}
		after, err := os.Stat(db.path)
		if err == nil && os.SameFile(before, after) {
			if metaDamaged {
				// bbolt opens at the other meta page's commit, a
				// consistent state: what the last commit wrote is lost
				// if the damaged page was the newer one, as if the
				// process had crashed just before it.
				db.stats.corrupt.Add(1)
				db.log.Error("ratedb: one of the file's two meta pages is damaged; opened at the other one's commit: "+
					"windows written by the most recent snapshot may be lost", "path", db.path)
			}
			return bdb, nil
		}
		_ = bdb.Close()
		if attempt == 3 {
			return nil, fmt.Errorf("ratedb: the file was replaced while Open waited for it, three times")
		}
	}
}

// testBeforeOpenBolt, when set by a test, runs after the file is validated
// and before bbolt opens it.
var testBeforeOpenBolt func()

// loadFile checks the format of the file just opened, migrates a file of
// format ratedb/1, and reads the secret and the window count. The blocks'
// headers are read by the audit after Open (auditFile), through its own
// reads of the file.
func (db *DB) loadFile() error {
	// First the shape of the buckets' page trees (validateFile checked the
	// root bucket's): bbolt's cursors recurse or loop without end down a
	// cycle, and no read of a bucket may reach one. The meta bucket must
	// be sound to open the file at all, and so must a ratedb/1 file's
	// buckets, which the migration reads whole; damage in the blocks
	// bucket instead makes look-ups in the file fail with ErrCorrupt
	// until the audit after Open has rebuilt it (treeDamaged).
	var legacy bool
	blocksErr, err := db.checkTrees()
	if err != nil {
		return err
	}
	err = db.view(func(tx *bolt.Tx) error {
		mb := tx.Bucket(layout.BucketMeta)
		if mb == nil {
			return fmt.Errorf("%w: not a ratedb database (missing buckets)", ErrCorrupt)
		}
		f := mb.Get(layout.KeyFormat)
		legacy = layout.IsLegacy(f)
		if !legacy && string(f) != string(layout.Format) {
			return fmt.Errorf("%w: not a ratedb database or an unknown format version", ErrCorrupt)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if legacy {
		if blocksErr != nil {
			return fmt.Errorf("%w: a ratedb/1 file with damaged pages: %v", ErrCorrupt, blocksErr)
		}
		if err := db.migrateV1(); err != nil {
			return err
		}
	}
	err = db.view(func(tx *bolt.Tx) error {
		mb, bb := tx.Bucket(layout.BucketMeta), tx.Bucket(layout.BucketBlocks)
		if bb == nil {
			return fmt.Errorf("%w: not a ratedb database (missing buckets)", ErrCorrupt)
		}
		secret, err := layout.Secret(mb)
		if err != nil {
			return fmt.Errorf("%w: bad metadata", ErrCorrupt)
		}
		windows, ok := record.DecodeInt64(mb.Get(layout.KeyCount))
		if !ok || windows < 0 {
			return fmt.Errorf("%w: bad metadata", ErrCorrupt)
		}
		db.secret = secret
		db.stats.diskWindows.Store(windows)
		return nil
	})
	if err != nil {
		return err
	}
	// Only once the file is known to open: a file that then fails (bad
	// metadata) may be moved aside (CorruptMoveAside) and replaced by an
	// empty one, which must not inherit the flag (nothing would clear it:
	// the audit of a sound file rebuilds nothing).
	if blocksErr != nil {
		db.treeDamaged.Store(true)
		db.log.Error("ratedb: the file's blocks of windows have damaged pages: look-ups in the file fail until it is rebuilt, right after Open",
			"path", db.path, "err", blocksErr)
	}
	return nil
}

// checkTrees checks (layout.CheckTrees) the page trees of the file just
// opened, as of the commit bbolt opened it at, before bbolt reads anything
// but its meta page: damage to the root or meta bucket is the error err
// (wrapping ErrCorrupt), damage to the trees of windows is blocksErr.
func (db *DB) checkTrees() (blocksErr, err error) {
	f, err := os.Open(db.path)
	if err != nil {
		return nil, fmt.Errorf("ratedb: %w", err)
	}
	defer f.Close()
	err = db.view(func(tx *bolt.Tx) error { // under guard: a fault reading the map panics
		var err error
		if blocksErr, err = layout.CheckTrees(tx, f); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return nil
	})
	return blocksErr, err
}

// createFile creates an empty ratedb database at path atomically: it is built
// under a temporary name and linked into place, so a crash never leaves a
// half-initialised file behind. It returns an error wrapping fs.ErrExist if
// path appeared meanwhile.
func createFile(path string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("ratedb: %w", err)
	}
	tmp := f.Name()
	_ = f.Close()
	defer os.Remove(tmp)
	// bbolt initialises only a zero-length file.
	if err := os.Truncate(tmp, 0); err != nil {
		return fmt.Errorf("ratedb: %w", err)
	}
	bdb, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("ratedb: creating database: %w", err)
	}
	err = bdb.Update(initFile)
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ratedb: creating database: %w", err)
	}
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("ratedb: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// initFile creates the buckets and metadata of an empty database, with a
// new secret.
func initFile(tx *bolt.Tx) error { return initFileWith(tx, layout.NewSecret()) }

// initFileWith is initFile with the given secret (layout.SecretLen bytes).
func initFileWith(tx *bolt.Tx, secret []byte) error {
	mb, err := tx.CreateBucket(layout.BucketMeta)
	if err != nil {
		return err
	}
	if _, err := tx.CreateBucket(layout.BucketBlocks); err != nil {
		return err
	}
	if err := mb.Put(layout.KeySecret, secret); err != nil {
		return err
	}
	if err := mb.Put(layout.KeyCount, record.EncodeInt64(0)); err != nil {
		return err
	}
	return mb.Put(layout.KeyFormat, layout.Format)
}

// initialMmapSize is the size of bbolt's first memory map: 1 GiB on 64-bit
// platforms, 64 MiB on 32-bit ones, where address space is scarce.
const initialMmapSize = 1<<26 + (1<<30-1<<26)*(strconv.IntSize/64)

// fileGrowth is how far past its data bbolt extends the file when a commit
// needs more room.
const fileGrowth = 1 << 20

// openBolt opens the bbolt file, turning a lock timeout into ErrLocked and a
// panic or fault on a damaged file into ErrCorrupt.
func openBolt(path string, timeout time.Duration, noSync bool) (bdb *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			bdb, err = nil, fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	bdb, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      timeout,
		FreelistType: bolt.FreelistMapType,
		NoSync:       noSync,
		// A map that covers the file's growth from the start: each time a
		// commit outgrows bbolt's map, bbolt remaps and first copies every
		// key and value the transaction holds out of the old map, which
		// made a large first snapshot spend most of its time in copies.
		// The map reserves address space only.
		InitialMmapSize: initialMmapSize,
	})
	switch {
	case err == nil:
		// With a map larger than the file, bbolt grows the file past its
		// data by AllocSize (16 MiB by default); keep that slack small.
		bdb.AllocSize = fileGrowth
		return bdb, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, ErrLocked
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping):
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil, fmt.Errorf("ratedb: opening %s: %w", path, err)
}

// view and update run a bbolt transaction, turning a panic or memory fault
// (bbolt's reaction to some damaged pages) into an error wrapping ErrCorrupt.
// view may run at any time; boltMu keeps rebuild from switching files under
// it. update runs with snapMu held, as rebuild does.
func (db *DB) view(fn func(*bolt.Tx) error) error {
	db.boltMu.RLock()
	defer db.boltMu.RUnlock()
	return guard(func() error { return db.bolt.View(fn) })
}

func (db *DB) update(fn func(*bolt.Tx) error) error {
	if db.fileErr != nil {
		return db.fileErr
	}
	return guard(func() error { return db.bolt.Update(fn) })
}

func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	return fn()
}

// load reads key's window from the file into dst. Without one (or with a
// damaged block, which is counted and skipped) it returns empty counters and
// found == false. With a file it also returns fh, the file hash of key's
// record key, for the entry to keep (see keepFileHash), whatever the error;
// in memory-only mode there is nothing to read, and fh is 0.
func (s *spec) load(key string, dst []counter) (cs []counter, found bool, fh uint64, err error) {
	db := s.db
	n := len(s.scales)
	if db.persist {
		k := make([]byte, 0, len(s.prefix)+len(key))
		k = append(append(k, s.prefix...), key...)
		fh = layout.Hash(db.secret, k) // the presence filter's secret too (presence.secret)
		if p := db.presence.Load(); p != nil {
			if !p.mayContain(fh) {
				db.stats.readsAvoided.Add(1)
				return zeroCounters(dst, n), false, fh, nil
			}
			if p.full() {
				// New windows have filled it up: a larger one is due
				// now, not at the next snapshot, which a flood's
				// backlog can delay by seconds.
				db.maybeBuildPresence()
			}
		}
		if db.treeDamaged.Load() {
			// bbolt's Seek would recurse down the damaged tree (see
			// loadFile) until the audit's rebuild replaces the file.
			return dst[:0], false, fh, fmt.Errorf("%w: the file's blocks of windows have damaged pages (until the file is rebuilt)", ErrCorrupt)
		}
		err = db.view(func(tx *bolt.Tx) error {
			bk, v := layout.SeekBlock(tx.Bucket(layout.BucketBlocks).Cursor(), fh)
			if v == nil {
				return nil
			}
			var derr error
			cs, found, derr = record.FindInBlock(dst, bk, v, k)
			if derr == nil && found && len(cs) != n {
				derr = record.ErrTiers
			}
			if derr != nil {
				found = false
				db.stats.corrupt.Add(1)
				db.logDamagedBlock(derr)
			}
			return nil
		})
		if err != nil {
			return dst[:0], false, fh, err
		}
		if found {
			return cs, true, fh, nil
		}
	}
	return zeroCounters(dst, n), false, fh, nil
}

// logDamagedBlock logs a look-up that skipped a damaged block, at most once
// a second: every look-up of a key of the block meets it again until a
// snapshot or the janitor rewrites the block, and a line each would let
// the requests behind them fill the log. Stats.CorruptSkipped counts them
// all. A clock stepped back past the last line logs at once: waiting for
// it to catch up would silence the warning for as long as the step.
func (db *DB) logDamagedBlock(err error) {
	now, last := time.Now().UnixNano(), db.damagedLogAt.Load()
	if d := now - last; (d >= 0 && d < int64(time.Second)) || !db.damagedLogAt.CompareAndSwap(last, now) {
		return
	}
	db.log.Warn("ratedb: skipping a damaged block of windows (logged at most once a second; Stats.CorruptSkipped counts every skip)",
		"err", err, "corrupt_skipped", db.stats.corrupt.Load())
}

// zeroCounters returns dst holding n empty counters.
func zeroCounters(dst []counter, n int) []counter {
	dst = dst[:0]
	for range n {
		dst = append(dst, counter{})
	}
	return dst
}

// validateFile checks a file before bbolt maps it: bbolt panics, or faults
// with SIGSEGV/SIGBUS, on some damaged files (a meta page that points past the
// end of a truncated file, a freelist page that is not one). It accepts only
// a file whose meta page, the one bbolt will use, is intact and consistent
// with the file's size, and returns that meta page. metaDamaged reports that
// the other meta page failed its checks: bbolt then opens at the commit of
// the one that passed.
//
// A read that fails (an I/O error such as EIO) says nothing about the
// file's bytes: it is returned wrapped, never as ErrCorrupt, so that
// CorruptMoveAside does not move a sound file aside over a transient error.
// Only a file that ends before the bytes its pages need is damage.
func validateFile(path string) (m bmeta, metaDamaged bool, err error) {
	f, err := openRegular(path)
	if err != nil {
		return bmeta{}, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return bmeta{}, false, fmt.Errorf("ratedb: %w", err)
	}
	size := fi.Size()
	if size == 0 {
		return bmeta{}, false, fmt.Errorf("%w: zero-byte file", ErrCorrupt)
	}
	var r io.ReaderAt = f
	if testValidateReader != nil {
		r = testValidateReader(r)
	}
	m0, ok0, err := readMeta(r, 0)
	if err != nil {
		return bmeta{}, false, err
	}
	var m1 bmeta
	ok1 := false
	if ok0 {
		if m1, ok1, err = readMeta(r, int64(m0.pageSize)); err != nil {
			return bmeta{}, false, err
		}
	} else {
		for _, ps := range []int64{4096, 1024, 2048, 8192, 16384, 32768, 65536} {
			if m1, ok1, err = readMeta(r, ps); err != nil {
				return bmeta{}, false, err
			} else if ok1 && int64(m1.pageSize) == ps {
				break
			}
			ok1 = false
		}
	}
	// bbolt uses the meta with the higher transaction id if it is valid,
	// else the other one.
	m, ok := m0, ok0
	if ok1 && (!ok0 || m1.txid > m0.txid) {
		m, ok = m1, ok1
	}
	if !ok {
		return bmeta{}, false, fmt.Errorf("%w: no valid meta page", ErrCorrupt)
	}
	ps := int64(m.pageSize)
	switch {
	case ps < 512 || ps > 1<<20 || ps&(ps-1) != 0:
		return bmeta{}, false, fmt.Errorf("%w: bad page size", ErrCorrupt)
	case m.pgid < 4 || m.pgid > uint64(size/ps):
		return bmeta{}, false, fmt.Errorf("%w: file is shorter than its meta page says (truncated?)", ErrCorrupt)
	case m.root < 2 || m.root >= m.pgid:
		return bmeta{}, false, fmt.Errorf("%w: bad root page", ErrCorrupt)
	case m.freelist != ^uint64(0) && (m.freelist < 2 || m.freelist >= m.pgid):
		return bmeta{}, false, fmt.Errorf("%w: bad freelist page", ErrCorrupt)
	}
	if flags, overflow, ok, err := readPageHeader(r, int64(m.root)*ps); err != nil {
		return bmeta{}, false, err
	} else if !ok || flags&(pageBranch|pageLeaf) == 0 || m.root+uint64(overflow) >= m.pgid {
		return bmeta{}, false, fmt.Errorf("%w: bad root page", ErrCorrupt)
	}
	if m.freelist == ^uint64(0) {
		// No freelist (written by a bbolt with NoFreelistSync, as other
		// applications' files can be; ratedb always writes it): bbolt
		// rebuilds it at Open by reading every page on a goroutine of its
		// own, where a damaged page's panic or fault ends the process.
		// So every page is checked first.
		a := newPageAudit(r, m)
		if a.run(m.root); a.err != nil && !shortRead(a.err) {
			return bmeta{}, false, a.err
		} else if a.err != nil || a.damaged > 0 {
			return bmeta{}, false, fmt.Errorf("%w: damaged pages in a file without a freelist", ErrCorrupt)
		}
	}
	if m.freelist != ^uint64(0) {
		flags, overflow, ok, err := readPageHeader(r, int64(m.freelist)*ps)
		if err != nil {
			return bmeta{}, false, err
		}
		if !ok || flags&pageFreelist == 0 || m.freelist+uint64(overflow) >= m.pgid {
			return bmeta{}, false, fmt.Errorf("%w: bad freelist page", ErrCorrupt)
		}
		if valid, err := freelistValid(r, int64(m.freelist)*ps, (int64(overflow)+1)*ps, m.pgid); err != nil {
			return bmeta{}, false, err
		} else if !valid {
			// bbolt trusts the ids: a damaged one makes it write pages
			// at wild offsets or hand one page out twice.
			return bmeta{}, false, fmt.Errorf("%w: bad freelist", ErrCorrupt)
		}
	}
	return m, ok0 != ok1, nil
}

// bbolt's on-disk constants (go.etcd.io/bbolt/internal/common).
const (
	boltMagic    = 0xED0CDAED
	boltVersion  = 2
	pageHeader   = 16
	pageBranch   = 0x01
	pageLeaf     = 0x02
	pageMeta     = 0x04
	pageFreelist = 0x10
	metaLen      = 64 // magic, version, pageSize, flags, root, sequence, freelist, pgid, txid, checksum
)

type bmeta struct {
	pageSize       uint32
	root, freelist uint64
	pgid, txid     uint64
}

// testValidateReader, when set by a test, wraps the reader through which
// validateFile reads the file.
var testValidateReader func(io.ReaderAt) io.ReaderAt

// readAt reads len(b) bytes at off of r. ok is false if r ends before them
// (a truncated file: damage, for the caller to judge); err is any other read
// error, wrapped: a failure to read (EIO), which says nothing about the
// bytes and is no sign of corruption.
func readAt(r io.ReaderAt, b []byte, off int64) (ok bool, err error) {
	n, err := r.ReadAt(b, off)
	switch {
	case n == len(b):
		return true, nil
	case err == nil || shortRead(err):
		return false, nil
	}
	return false, fmt.Errorf("ratedb: reading the database file: %w", err)
}

// shortRead reports whether err, from reading the file, is its end coming
// before the bytes read (io.EOF, io.ErrUnexpectedEOF), not a failure to read.
func shortRead(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// readMeta reads and checks (magic, version, checksum) the meta page at off.
// ok is false for a page that fails the checks or lies past the end of the
// file; err is a read error (see readAt).
func readMeta(r io.ReaderAt, off int64) (m bmeta, ok bool, err error) {
	var b [pageHeader + metaLen]byte
	if ok, err := readAt(r, b[:], off); !ok {
		return bmeta{}, false, err
	}
	if binary.LittleEndian.Uint16(b[8:])&pageMeta == 0 {
		return bmeta{}, false, nil
	}
	p := b[pageHeader:]
	le := binary.LittleEndian
	if le.Uint32(p[0:]) != boltMagic || le.Uint32(p[4:]) != boltVersion {
		return bmeta{}, false, nil
	}
	h := fnv.New64a()
	_, _ = h.Write(p[:56])
	if h.Sum64() != le.Uint64(p[56:]) {
		return bmeta{}, false, nil
	}
	return bmeta{
		pageSize: le.Uint32(p[8:]),
		root:     le.Uint64(p[16:]),
		freelist: le.Uint64(p[32:]),
		pgid:     le.Uint64(p[40:]),
		txid:     le.Uint64(p[48:]),
	}, true, nil
}

// freelistValid reports whether the freelist page of n bytes at off lists
// only pages below pgid (past the two meta pages), in increasing order, as
// bbolt writes it; err is a read error (see readAt).
func freelistValid(r io.ReaderAt, off, n int64, pgid uint64) (bool, error) {
	b := make([]byte, n)
	if ok, err := readAt(r, b, off); !ok {
		return false, err
	}
	ids, ok := freelistIDs(b)
	if !ok {
		return false, nil
	}
	prev := uint64(1)
	for i := 0; i < len(ids); i += 8 {
		id := binary.LittleEndian.Uint64(ids[i:])
		if id <= prev || id >= pgid {
			return false, nil
		}
		prev = id
	}
	return true, nil
}

// freelistIDs returns the page ids listed by the freelist page b (with its
// overflow), 8 bytes each, little endian; ok is false if the count in its
// header does not fit in b.
func freelistIDs(b []byte) (ids []byte, ok bool) {
	if len(b) < pageHeader+8 {
		return nil, false
	}
	count, start := uint64(binary.LittleEndian.Uint16(b[10:])), uint64(pageHeader)
	if count == 0xFFFF { // the real count is the first element
		count, start = binary.LittleEndian.Uint64(b[pageHeader:]), pageHeader+8
	}
	if count > (uint64(len(b))-start)/8 {
		return nil, false
	}
	return b[start : start+8*count], true
}

// readPageHeader returns the flags and overflow count of the page at off;
// ok is false if the file ends before it, err is a read error (see readAt).
func readPageHeader(r io.ReaderAt, off int64) (flags uint16, overflow uint32, ok bool, err error) {
	var b [pageHeader]byte
	if ok, err := readAt(r, b[:], off); !ok {
		return 0, 0, false, err
	}
	return binary.LittleEndian.Uint16(b[8:]), binary.LittleEndian.Uint32(b[12:]), true, nil
}
