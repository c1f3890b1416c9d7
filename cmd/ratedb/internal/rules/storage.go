package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
// (ratedb.db.rules.json), replaced atomically: written to a temporary file,
// synced, renamed over the old one, and the directory synced. The service
// writes it only while it holds the state file's lock, so one process at a
// time writes it. It is safe for concurrent use when the caller serializes
// Update and Save (Manager does).
type FileStorage struct {
	// Path is the rules file.
	Path string
}

type fileFormat struct {
	Version int      `json:"version"`
	Rules   []Stored `json:"rules"`
}

// RulesPath is the rules file kept beside the state file dbPath.
func RulesPath(dbPath string) string { return dbPath + ".rules.json" }

// Load implements Storage.
func (f FileStorage) Load() ([]Stored, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rules: reading %s: %w", f.Path, err)
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

// Save replaces the stored rules, durably, before returning.
func (f FileStorage) Save(rs []Stored) error {
	b, err := json.MarshalIndent(fileFormat{Version: 1, Rules: rs}, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, filepath.Base(f.Path)+".tmp*")
	if err != nil {
		return fmt.Errorf("rules: saving: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(append(b, '\n')); err != nil {
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
