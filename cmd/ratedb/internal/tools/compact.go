package tools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ratedb/ratedb"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// CompactResult says what Compact did.
type CompactResult struct {
	// Cleaned is the number of expired windows removed.
	Cleaned int
	// Before and After are the file's sizes in bytes.
	Before, After int64
}

// Compact removes the expired windows of the ratedb file at path (ratedb's
// janitor pass), then rewrites the file into a fresh one (bbolt's Compact),
// syncs it and renames it over the old one. It refuses with ErrInUse while a
// ratedb process holds the file, and holds the file's lock until the new
// file is in place.
func Compact(path string) (CompactResult, error) {
	var res CompactResult
	st, err := os.Stat(path)
	if err != nil {
		return res, err
	}
	res.Before = st.Size()
	db, err := ratedb.Open(path, &ratedb.Options{MaxHotKeys: 1024, SnapshotPeriod: -1, CleanPeriod: -1, OpenTimeout: lockTimeout})
	if errors.Is(err, ratedb.ErrLocked) {
		return res, fmt.Errorf("%s: %w", path, ErrInUse)
	}
	if err != nil {
		return res, err
	}
	res.Cleaned, err = db.Clean()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
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
	tmp := path + ".compact"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, nil)
	if err != nil {
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
