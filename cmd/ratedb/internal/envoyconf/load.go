package envoyconf

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Load reads path, a single config file or a directory, and parses it with
// Parse. A directory loads the files envoyproxy/ratelimit loads from it (see
// "Config directory" in the package doc): every file below it, in
// subdirectories too, whatever its name, hidden ones included, in
// filepath.WalkDir's lexical order, each named by its slash-separated path
// relative to the directory. An unreadable path or file is returned as the
// os error; an invalid file wraps ErrInvalidConfig.
func Load(path string) (*Config, error) { return LoadWith(path, LoadOptions{}) }

// LoadOptions change which files of a directory Load reads and how they
// combine. The zero value is envoyproxy/ratelimit's default behaviour.
type LoadOptions struct {
	// IgnoreDotFiles skips the files and directories below the path whose
	// names start with a dot (the path itself is read whatever its name),
	// as envoyproxy/ratelimit does with RUNTIME_IGNOREDOTFILES=true
	// (usual with a Kubernetes ConfigMap volume, whose "..data" and
	// "..2024_..." entries hold a second copy of every file). Default
	// false, as upstream's.
	IgnoreDotFiles bool
	// MergeDomains merges the descriptors of a domain declared in several
	// files into one domain, as envoyproxy/ratelimit does with
	// MERGE_DOMAIN_CONFIG=true: each file's top-level descriptors join the
	// domain's, in load order, and a top-level entry (key and value) that
	// two files declare is an error. Default false, as upstream's: a
	// domain declared twice is an error.
	MergeDomains bool
}

// LoadWith is Load with options.
func LoadWith(path string, o LoadOptions) (*Config, error) {
	files, err := readFiles(path, o)
	if err != nil {
		return nil, err
	}
	return ParseWith(files, o)
}

// Stamp summarises the files under path (names, sizes, modification times
// and contents) so that a poller can tell when to reload: two equal stamps
// mean nothing visible changed. The contents count because a new version
// may keep the old one's size and mtime: a file of the Nix store (every
// mtime is 1), a reproducible tarball's (SOURCE_DATE_EPOCH), `cp -p`'s, or
// two writes within a filesystem's timestamp granularity. It returns ""
// when path cannot be listed or a file's metadata cannot be read. Stamp
// reads every file; a Watcher's polls read only the files that may have
// changed.
func Stamp(path string) string { return StampWith(path, LoadOptions{}) }

// StampWith is Stamp of the files LoadWith(path, o) reads.
func StampWith(path string, o LoadOptions) string { return NewWatcher(path, o).stamp() }

// configFile is one file to load: where to read it and its name in errors
// and in Config.Files.
type configFile struct {
	path, name string
}

// configPaths lists the files Load reads from path. Like goruntime's loader
// (filepath.Walk), it descends into subdirectories, hidden ones included,
// reads a symlink to a file and does not follow a symlink to a directory.
// Where goruntime logs a file it cannot read and goes on without it (so its
// domain would be unlimited), configPaths fails.
func configPaths(path string, o LoadOptions) ([]configFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []configFile{{path: path, name: filepath.Base(path)}}, nil
	}
	// Resolve path, so that a symlink to the directory is walked (WalkDir
	// does not descend into one) and swapping it changes Stamp.
	root, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	var files []configFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if o.IgnoreDotFiles && p != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			if fi.IsDir() {
				return nil
			}
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, configFile{path: p, name: filepath.ToSlash(rel)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoFiles, path)
	}
	return files, nil
}

func readFiles(path string, o LoadOptions) ([]File, error) {
	paths, err := configPaths(path, o)
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(paths))
	for _, f := range paths {
		data, err := readLimited(f)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: f.name, Data: data})
	}
	return files, nil
}

func readLimited(cf configFile) ([]byte, error) {
	data, _, err := readFile(cf)
	return data, err
}

// testBeforeOpen, when set by a test, runs between readFile's check of a
// file and its open.
var testBeforeOpen func(path string)

// readFile reads cf and returns its contents with the status of the file
// it read, taken before reading (so that a change made during the read
// changes the file's status after it).
func readFile(cf configFile) ([]byte, os.FileInfo, error) {
	fi, err := os.Stat(cf.path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		// A fifo would block the read (and goruntime with it).
		return nil, nil, fmt.Errorf("%w: %s: not a regular file", ErrInvalidConfig, cf.name)
	}
	if testBeforeOpen != nil {
		testBeforeOpen(cf.path)
	}
	f, err := os.OpenFile(cf.path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	// The status of the file opened, which cf.path may no longer name: it
	// may have been replaced since the check above, by a fifo too.
	if fi, err = f.Stat(); err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w: %s: not a regular file", ErrInvalidConfig, cf.name)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxFileSize {
		return nil, nil, fmt.Errorf("%w: %s: file larger than %d bytes", ErrInvalidConfig, cf.name, maxFileSize)
	}
	return data, fi, nil
}
