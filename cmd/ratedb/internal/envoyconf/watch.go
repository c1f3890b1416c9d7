package envoyconf

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// racyWindow is how long after its last change a file must have been
// hashed for a Watcher to trust its hash while the file's status stays the
// same. A change made after the hash sets the file's change time to the
// current time, later than the recorded one by more than the filesystem's
// timestamp granularity (1 ns on ext4, xfs, btrfs and tmpfs; 1 s on ext3
// and HFS+; 2 s on FAT) plus the lag of the kernel's coarse clock (a tick,
// at most 10 ms): 3 s covers them all.
const racyWindow = 3 * time.Second

// A Watcher loads the config at a path (a file or a directory, as LoadWith)
// and tells, poll by poll, when its files have changed.
//
// A change is loaded once two polls in a row see the same files, and only
// if the files the load reads are still those: a file being rewritten in
// place (truncated, then written) is not loaded half-written, where a valid
// prefix of it (its domain line alone) would leave its domain without
// limits, unless its writer pauses for longer than the interval between
// polls. Replacing files by rename (mv, a symlink swap, a Kubernetes
// ConfigMap update) never shows a half-written file.
//
// A poll lists the files and reads only those that may have changed: a
// file whose status (device, inode, size, mode, mtime and ctime) is the one
// it had when the Watcher last hashed it, at least 3 s after its last
// change, keeps that hash. The SHA-256 of the contents decides the rest, so
// a new version with the old size, mtime and inode (written in place, its
// mtime kept as `cp -p` or a Nix store keep it) is still seen: writing it
// sets the ctime, which no user can set back. A file that changed within
// the 3 s before it was hashed is read again at each poll until its hash is
// older, so a second write within the filesystem's timestamp granularity is
// seen too. What can hide a change: the wall clock stepping back, or a
// network filesystem whose server's clock runs behind this machine's,
// across a rewrite in place that keeps the size, mtime and inode and comes
// within the server's timestamp granularity of the previous change. On
// platforms other than Linux every poll reads every file.
//
// A Watcher is not safe for concurrent use.
type Watcher struct {
	path string
	opts LoadOptions
	now  func() time.Time // the wall clock; tests move it
	// hashed holds, by path, the files whose hash is trusted while their
	// status stays the same.
	hashed map[string]hashedFile
	// last is the stamp of the files last loaded (by Load or Poll), seen
	// that of the files the last poll saw.
	last, seen string
	// reads counts the files read, for tests.
	reads int
}

// fileID is the status of a file that its hash is trusted with.
type fileID struct {
	dev, ino     uint64
	size         int64
	mode         fs.FileMode
	mtime, ctime int64 // Unix ns
}

type hashedFile struct {
	id  fileID
	sum [sha256.Size]byte
}

// NewWatcher returns a Watcher of the files LoadWith(path, o) reads. It
// reads nothing until Load or Poll.
func NewWatcher(path string, o LoadOptions) *Watcher {
	return &Watcher{path: path, opts: o, now: time.Now, hashed: map[string]hashedFile{}}
}

// Load reads every file and parses them as LoadWith does, at once; later
// polls compare the files with the version Load read, valid or not.
func (w *Watcher) Load() (*Config, error) {
	stamp, files, err := w.scan(true)
	w.last, w.seen = stamp, stamp
	if err != nil {
		return nil, err
	}
	return ParseWith(files, w.opts)
}

// Poll tells whether the files have changed since they were last loaded
// and have stayed the same since the previous poll; if so, it loads them:
// changed is then true and cfg and err are the load's (on error, the
// caller keeps its previous config, and the files are loaded again once
// they change). A change seen for the first time, or made while the load
// read the files, waits for the next poll.
func (w *Watcher) Poll() (cfg *Config, changed bool, err error) {
	cur, prev := w.stamp(), w.seen
	w.seen = cur
	if cur == w.last || cur != prev {
		return nil, false, nil
	}
	stamp, files, err := w.scan(true)
	if stamp != cur {
		// Changed again while being read.
		w.seen = stamp
		return nil, false, nil
	}
	w.last = stamp
	if err != nil {
		return nil, true, err
	}
	cfg, err = ParseWith(files, w.opts)
	return cfg, true, err
}

// stamp is Stamp of the watched files, reading only those that may have
// changed.
func (w *Watcher) stamp() string {
	s, _, _ := w.scan(false)
	return s
}

// scan lists the files and returns their stamp (see Stamp). With all, it
// reads every file and returns their contents and the first error;
// otherwise it reads only the files whose hash it cannot trust.
func (w *Watcher) scan(all bool) (stamp string, files []File, err error) {
	paths, err := configPaths(w.path, w.opts)
	if err != nil {
		return "", nil, err
	}
	hashed := make(map[string]hashedFile, len(paths))
	defer func() { w.hashed = hashed }()
	var b strings.Builder
	for _, f := range paths {
		// The time before the status: a change made after it sets a
		// later ctime.
		t0 := w.now()
		fi, serr := os.Stat(f.path)
		if serr != nil {
			return "", nil, serr
		}
		if h, ok := w.hashed[f.path]; ok && !all {
			if id, ok := statID(fi); ok && id == h.id {
				hashed[f.path] = h
				fmt.Fprintf(&b, "%s\x00%d\x00%d\x00%x\x00", f.path, fi.Size(), fi.ModTime().UnixNano(), h.sum)
				continue
			}
		}
		w.reads++
		data, rfi, rerr := readFile(f)
		if rerr != nil {
			// Unreadable (the load fails): the stamp changes when it
			// becomes readable.
			fmt.Fprintf(&b, "%s\x00%d\x00%d\x00error %v\x00", f.path, fi.Size(), fi.ModTime().UnixNano(), rerr)
			if err == nil {
				err = rerr
			}
			continue
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s\x00%d\x00%d\x00%x\x00", f.path, rfi.Size(), rfi.ModTime().UnixNano(), sum)
		if all {
			files = append(files, File{Name: f.name, Data: data})
		}
		if id, ok := statID(rfi); ok && time.Unix(0, id.ctime).Before(t0.Add(-racyWindow)) {
			hashed[f.path] = hashedFile{id: id, sum: sum}
		}
	}
	return b.String(), files, err
}
