package tools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/layout"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// CompactResult says what Compact did.
type CompactResult struct {
	// Cleaned is the number of expired windows removed.
	Cleaned int
	// Damaged is the damage the janitor pass dropped from the file, as
	// ratedb's Stats.CorruptSkipped counts it: damaged blocks of windows
	// (inspect's unreadable count), records of a ratedb/1 file its
	// migration could not read, a damaged meta page, the pages and blocks
	// a rebuild left out. The windows they held were unreadable: serve
	// would have counted them anew, and they are gone from the new file.
	Damaged int64
	// Lost is the number of windows the damage Damaged counts took with
	// it: the window count the file recorded before Compact opened it,
	// less Cleaned and the new file's count. A damaged page of the tree
	// of blocks can hold thousands of windows, and Damaged counts it once.
	// -1 if the file's count could not be read (its root or meta bucket
	// is damaged).
	Lost int64
	// Before and After are the file's sizes in bytes.
	Before, After int64
	// KeptAs is the path of the copy of the damaged file that ratedb kept
	// when it rebuilt a file with damaged pages ("<path>.corrupt-<unix-ms>",
	// beside the file: the windows in its damaged places are in no other
	// file), or "" if it rebuilt none. Compact never removes it: the
	// operator does, once it is of no more use.
	KeptAs string
}

// Compact removes the expired windows of the ratedb file at path (ratedb's
// janitor pass), then rewrites the file into a fresh one (bbolt's Compact),
// syncs it and renames it over the old one. It refuses with ErrInUse while a
// ratedb process holds the file. It holds the file's lock during the pass
// and again from the start of the rewrite until the new file is in place,
// but not in between: a ratedb process that takes the file then makes
// Compact fail with ErrInUse (the pass's changes stay, the file is not
// replaced), and a file replaced meanwhile is detected and left alone.
//
// The janitor pass drops the file's damaged blocks, as serve's would:
// CompactResult.Damaged counts them, and CompactResult.Lost the windows
// they held. A file with damaged pages is first rebuilt by ratedb, as serve
// would rebuild it, which keeps the damaged file beside it as
// "<path>.corrupt-<unix-ms>" (CompactResult.KeptAs). It changes the file in place, before
// the rewrite: when Compact fails after it, the result it returns with the
// error still says what the pass removed.
//
// The new file takes the old one's permissions and owner (compacting as
// root a file the service owns leaves the service able to open it; Compact
// fails, leaving the old file in place, if it cannot give the owner back), and a path
// that is a symbolic link compacts the file it points to, leaving the link.
func Compact(path string) (CompactResult, error) {
	var res CompactResult
	path, err := filepath.EvalSymlinks(path)
	if err != nil {
		return res, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return res, err
	}
	res.Before = st.Size()
	// The window count the file records, before ratedb drops its damage:
	// what it held, readable or not.
	held, err := layout.Count(path, lockTimeout)
	if errors.Is(err, layout.ErrInUse) {
		return res, fmt.Errorf("%s: %w", path, ErrInUse)
	}
	if err != nil {
		held = -1 // ratedb.Open says what is wrong, or repairs it
	}
	// The damaged copy a rebuild keeps is the one that was not there
	// before.
	copies := corruptCopies(path)
	db, err := ratedb.Open(path, &ratedb.Options{MaxHotKeys: 1024, SnapshotPeriod: -1, CleanPeriod: -1, OpenTimeout: lockTimeout})
	if errors.Is(err, ratedb.ErrLocked) {
		return res, fmt.Errorf("%s: %w", path, ErrInUse)
	}
	if err != nil {
		// ratedb's errors never name the file; the operator's message must.
		return res, fmt.Errorf("%s: %w", path, err)
	}
	res.Cleaned, err = db.Clean()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	for n := range corruptCopies(path) {
		if !copies[n] {
			res.KeptAs = filepath.Join(filepath.Dir(path), n)
		}
	}
	stats := db.Stats()
	res.Damaged, res.Lost = stats.CorruptSkipped, -1
	if held >= 0 {
		res.Lost = max(held-int64(res.Cleaned)-stats.WindowsOnDisk, 0)
	}
	if err != nil {
		return res, err
	}

	if testBeforeCompactOpen != nil {
		testBeforeCompactOpen()
	}
	// bbolt may wait for the lock of a file that another process then
	// replaces (another compact, or a ratedb rebuild, renames its new file
	// over it, then lets the old one go). Compacting the old file and
	// renaming it over the path would drop the new file and whatever was
	// written to it since: the file at the path must be the same before
	// and after the wait.
	before, err := os.Stat(path)
	if err != nil {
		return res, err
	}
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return res, fmt.Errorf("%s: %w", path, ErrInUse)
	}
	if err != nil {
		return res, err
	}
	defer src.Close()
	if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
		return res, fmt.Errorf("%s: the file was replaced while compact waited for its lock: %w", path, ErrInUse)
	}
	// The new file gets a name of its own, created exclusively: a fixed
	// name, removed and then opened, would let anyone who can write to the
	// directory plant a symbolic link there in between, and bbolt would
	// follow it. Files of earlier compacts cut short are removed first (this
	// one holds the lock, so no other is under way).
	removeCompactLeftovers(path)
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".compact-*")
	if err != nil {
		return res, err
	}
	tmp := f.Name()
	if testAfterCompactTemp != nil {
		testAfterCompactTemp(tmp)
	}
	// The new file is written, and given its mode and owner, through the
	// descriptor CreateTemp returned, never reopened by its name: whoever
	// can write to the directory could have replaced that name with a
	// symbolic link meanwhile.
	created, err := f.Stat()
	if err == nil {
		err = sameOwnerAndMode(f, st)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return res, err
	}
	given := false
	dst, err := bolt.Open(tmp, st.Mode().Perm(), &bolt.Options{OpenFile: func(string, int, os.FileMode) (*os.File, error) {
		if given {
			return nil, errors.New("compact: the new file may not be opened again by its name")
		}
		given = true
		return f, nil
	}})
	if err != nil {
		if !given {
			f.Close()
		}
		os.Remove(tmp)
		return res, err
	}
	if err := bolt.Compact(dst, src, 1<<20); err != nil {
		dst.Close()
		os.Remove(tmp)
		return res, fmt.Errorf("compacting: %w", err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		os.Remove(tmp)
		return res, err
	}
	if err := dst.Close(); err != nil {
		os.Remove(tmp)
		return res, err
	}
	if fi, err := os.Lstat(tmp); err != nil || !os.SameFile(fi, created) {
		os.Remove(tmp)
		return res, fmt.Errorf("%s: the new file's name %s was replaced while compact wrote it; the file was left as it was", path, filepath.Base(tmp))
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return res, err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	if st, err := os.Stat(path); err == nil {
		res.After = st.Size()
	}
	return res, nil
}

// removeCompactLeftovers removes the regular files that compacts of the
// file at path cut short left beside it: "<name>.compact-N" (N the decimal
// digits os.CreateTemp puts in place of '*'), and "<name>.compact" of
// earlier versions. Names are matched as strings, not as a glob pattern,
// which a path holding '[' or '*' would turn into another file's; an
// operator's own "<name>.compact-old" is no leftover and is kept.
func removeCompactLeftovers(path string) {
	dir, name := filepath.Dir(path), filepath.Base(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		n := e.Name()
		if (n == name+".compact" || isTempName(n, name+".compact-")) && e.Type().IsRegular() {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
}

// corruptCopies returns the names of the regular files beside the file at
// path that ratedb named as copies of it it kept damaged:
// "<name>.corrupt-N", N a time in milliseconds.
func corruptCopies(path string) map[string]bool {
	dir, name := filepath.Dir(path), filepath.Base(path)
	ents, _ := os.ReadDir(dir)
	m := map[string]bool{}
	for _, e := range ents {
		if n := e.Name(); isTempName(n, name+".corrupt-") && e.Type().IsRegular() {
			m[n] = true
		}
	}
	return m
}

// isTempName reports whether n is prefix followed by one or more decimal
// digits, a name os.CreateTemp gives for the pattern prefix+"*".
func isTempName(n, prefix string) bool {
	d, ok := strings.CutPrefix(n, prefix)
	return ok && d != "" && strings.Trim(d, "0123456789") == ""
}

// testBeforeCompactOpen, when set by a test, runs after the janitor pass,
// before Compact opens the file again to rewrite it.
var testBeforeCompactOpen func()

// testAfterCompactTemp, when set by a test, runs once Compact has created
// its new file, named tmp, before it writes to it.
var testAfterCompactTemp func(tmp string)

// sameOwnerAndMode gives the file f the permissions and the owner of the
// file old describes.
func sameOwnerAndMode(f *os.File, old os.FileInfo) error {
	if err := f.Chmod(old.Mode().Perm()); err != nil {
		return err
	}
	uid, gid, ok := owner(old)
	if !ok {
		return nil
	}
	if fi, err := f.Stat(); err == nil {
		if nu, ng, _ := owner(fi); nu == uid && ng == gid {
			return nil
		}
	}
	if err := f.Chown(uid, gid); err != nil {
		return fmt.Errorf("giving the compacted file the owner of the original (uid %d, gid %d): %w; run compact as that user or as root", uid, gid, err)
	}
	return nil
}
