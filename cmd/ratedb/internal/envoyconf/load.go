package envoyconf

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Load reads path, a single config file or a directory whose *.yaml and
// *.yml files (not its subdirectories) are loaded in name order, and parses
// it with Parse. An unreadable path is returned as the os error; an invalid
// file wraps ErrInvalidConfig.
func Load(path string) (*Config, error) {
	files, err := readFiles(path)
	if err != nil {
		return nil, err
	}
	return Parse(files)
}

// Stamp summarises the files under path (names, sizes, modification times)
// so that a poller can tell when to reload: two equal stamps mean nothing
// visible changed. It returns "" when path cannot be read.
func Stamp(path string) string {
	names, err := configPaths(path)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, n := range names {
		fi, err := os.Stat(n)
		if err != nil {
			return ""
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\x00", n, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

func configPaths(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.Type().IsRegular() || e.Type()&os.ModeSymlink != 0 {
			if ext == ".yaml" || ext == ".yml" {
				names = append(names, filepath.Join(path, e.Name()))
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoFiles, path)
	}
	sort.Strings(names)
	return names, nil
}

func readFiles(path string) ([]File, error) {
	names, err := configPaths(path)
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(names))
	for _, n := range names {
		data, err := readLimited(n)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: filepath.Base(n), Data: data})
	}
	return files, nil
}

func readLimited(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%w: %s: file larger than %d bytes", ErrInvalidConfig, filepath.Base(name), maxFileSize)
	}
	return data, nil
}
