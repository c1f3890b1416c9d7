package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/fileread"
)

// Storage keeps the stored rules. Implementations are safe for concurrent
// use.
type Storage interface {
	// Load returns the stored rules, none if nothing was ever saved.
	Load() ([]Stored, error)
	// Update passes the stored rules to f and replaces them with what f
	// returns, durably, before returning. It is atomic with respect to
	// every other Update of the same storage, by this process or another:
	// if another writer saves between Update's read and its save, Update
	// reads again and calls f again. An error from f is returned, and
	// nothing is saved.
	Update(f func([]Stored) ([]Stored, error)) error
}

// Stored is one rule as storage holds it.
type Stored struct {
	Spec
	Generation int64 `json:"generation"`
}

// FileStorage keeps the rules as JSON in one file beside the state file
// (ratedb.db.rules.json), replaced atomically: written to a temporary file
// beside it ("<name>.tmp<digits>"), synced, renamed over the old one, and the
// directory synced. A save cut short (the process killed before the rename)
// leaves the old file whole and the temporary file behind, which
// RemoveLeftovers removes. The service writes it only while it holds the
// state file's lock, so one process at a time writes it. The file holds at
// most MaxFileSize bytes: Load refuses a larger one, and Save refuses to
// write one. It is safe for concurrent use when the caller serializes
// Update and Save (Manager does).
type FileStorage struct {
	// Path is the rules file.
	Path string

	maxSize int // the bound in bytes, set by tests; zero: MaxFileSize
}

type fileFormat struct {
	Version int      `json:"version"`
	Rules   []Stored `json:"rules"`
}

// MaxFileSize is the largest rules file FileStorage reads or writes, in
// bytes: 256 MiB. The API bounds each rule (MaxNameLen, MaxPatternLen,
// MaxTiers), not how many there are: a rule takes about 240 bytes in the
// file as usually written, and at most about 7.9 KiB (names and patterns
// of the longest, each byte of a pattern escaped to six, such as "<" to
// "\u003c", and 16 tiers), so the file holds about a million rules of the
// first kind, or 33,000 of the largest. A --rules file (at most
// fileread.MaxSize, 16 MiB) takes at most about six times its size once
// stored (a "<" of YAML is "\u003c" here), under 100 MiB: it fits with
// room to spare for the rules added through the API. Past the bound, Save
// refuses the change (ErrRulesFileFull) rather than write a file the next
// start would refuse. The rules' value in Redis (--redis) has the same
// bound.
const MaxFileSize = 256 << 20

// RulesPath is the rules file kept beside the state file dbPath.
func RulesPath(dbPath string) string { return dbPath + ".rules.json" }

// limit is the bound of the file in bytes: MaxFileSize, unless a test set
// another.
func (f FileStorage) limit() int {
	if f.maxSize > 0 {
		return f.maxSize
	}
	return MaxFileSize
}

// Load implements Storage. The file must be a regular file, or a symbolic
// link to one, of at most MaxFileSize bytes: for a named pipe, a device or
// a directory Load returns at once an error wrapping fileread.ErrNotRegular,
// for a larger file one matching fileread.ErrTooLarge, each naming the file
// (and the bound). No file at all is no rules.
func (f FileStorage) Load() ([]Stored, error) {
	b, err := fileread.ReadFileLimit(f.Path, f.limit())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		// Every error of ReadFileLimit names the file.
		return nil, fmt.Errorf("rules: reading the rules file: %w", err)
	}
	var ff fileFormat
	if err := json.Unmarshal(b, &ff); err != nil {
		return nil, fmt.Errorf("rules: %s is not a rules file: %w", f.Path, err)
	}
	if ff.Version != 1 {
		return nil, fmt.Errorf("rules: %s has version %d, this ratedb reads 1", f.Path, ff.Version)
	}
	return ff.Rules, nil
}

// Update implements Storage. One process at a time writes the file (the
// service holds the state file's lock), and Manager serializes its
// changes, so a read followed by a save is atomic.
func (f FileStorage) Update(fn func([]Stored) ([]Stored, error)) error {
	cur, err := f.Load()
	if err != nil {
		return err
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	return f.Save(next)
}

// Save replaces the stored rules, durably, before returning. Rules that
// would take more than MaxFileSize bytes are not written (the file stays as
// it was): Save returns an error wrapping ErrRulesFileFull.
func (f FileStorage) Save(rs []Stored) error {
	b, err := json.MarshalIndent(fileFormat{Version: 1, Rules: rs}, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if len(b) > f.limit() {
		return fmt.Errorf("rules: saving %d rules (%d bytes): %w", len(rs), len(b), ErrRulesFileFull)
	}
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, filepath.Base(f.Path)+".tmp*")
	if err != nil {
		return fmt.Errorf("rules: saving: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("rules: saving: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("rules: saving: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("rules: saving: %w", err)
	}
	if testBeforeRename != nil {
		testBeforeRename(tmp.Name())
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("rules: saving: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("rules: saving: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("rules: saving: %w", err)
	}
	return nil
}

// testBeforeRename, when set by a test, runs once Save has written and
// synced the temporary file tmp, before it renames it over the rules file.
var testBeforeRename func(tmp string)

// RemoveLeftovers removes the temporary files that saves of the rules file
// cut short left beside it: regular files named "<name>.tmp" followed by
// decimal digits (os.CreateTemp's pattern, as Save names them), each up to
// MaxFileSize bytes, which nothing else would ever remove. Another name, such
// as an operator's "<name>.tmp-old", is kept. It returns how many it removed.
// Call it only while no other process can save the rules file (the service
// calls it at start, once it holds the state file's lock) and before this
// one saves: it would remove a save under way.
func (f FileStorage) RemoveLeftovers() int {
	dir, prefix := filepath.Dir(f.Path), filepath.Base(f.Path)+".tmp"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0 // the save that follows, if any, reports the directory
	}
	n := 0
	for _, e := range ents {
		d, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || d == "" || strings.Trim(d, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			n++
		}
	}
	return n
}
