// Package layout is the layout of a ratedb file (format ratedb/2): the
// bbolt buckets and meta keys, how a window's hash orders it, and a reader
// of every window that the file tools, the crash loop and ratedb itself
// share, so that only this package and the root package know the buckets.
//
// The file is a bbolt database with two buckets:
//
//   - meta: "format" = "ratedb/2", "secret" = 16 random bytes created with
//     the file, the key of the hash that orders windows, and "count" = the
//     number of windows (8 bytes, big endian).
//   - blocks: the windows, packed into blocks (see record.AppendBlock).
//     Each window has a record key (spec prefix + key) and a hash h, the
//     SipHash-2-4 of its record key under the secret. Windows are ordered
//     by (h, record key); a block holds a run of them under the bbolt key
//     of 8 bytes, big endian, at most the h of its first window and greater
//     than the h of every window of the block before it. A window is found
//     in the last block whose key is <= its h.
//
// Files of the previous format, ratedb/1 (one bbolt element per window and
// an expiry index), are migrated when ratedb opens them; see legacy.go.
package layout

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"time"

	"github.com/ratedb/ratedb/internal/record"
	"github.com/ratedb/ratedb/internal/siphash"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names, meta keys and the format marker.
var (
	BucketMeta   = []byte("meta")
	BucketBlocks = []byte("blocks")
	KeyFormat    = []byte("format")
	KeySecret    = []byte("secret")
	KeyCount     = []byte("count")
	Format       = []byte("ratedb/2")
)

// SecretLen is the length of the secret in bytes.
const SecretLen = 16

// Errors of Secret, ForEach, Read and Count.
var (
	// ErrFormat: the file is not a ratedb file of a format this package
	// reads.
	ErrFormat = errors.New("not a ratedb file of a known format")
	// ErrInUse: Read or Count timed out waiting for the file's lock.
	ErrInUse = errors.New("the file's lock is held")
	// ErrDamaged: Read or Count met a page bbolt cannot read (it panics on a
	// damaged page, and faults on a file shorter than its meta page says).
	ErrDamaged = errors.New("the file is damaged")
)

// NewSecret returns a new random secret.
func NewSecret() []byte {
	b := make([]byte, SecretLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return b
}

// Secret returns the hash key stored in the meta bucket mb.
func Secret(mb *bolt.Bucket) (siphash.Key, error) {
	b := mb.Get(KeySecret)
	if len(b) != SecretLen {
		return siphash.Key{}, fmt.Errorf("%w: bad secret", ErrFormat)
	}
	return siphash.KeyFrom(b), nil
}

// Hash is the h of the record key k under key.
func Hash(key siphash.Key, k []byte) uint64 { return siphash.Sum64(key, k) }

// BlockKey returns the bbolt key of a block whose key is h.
func BlockKey(h uint64) [8]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], h)
	return b
}

// KeyH reads a block's bbolt key as a number. A key of another length than
// 8 (only in a damaged file) is read zero padded or truncated.
func KeyH(k []byte) uint64 {
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// SeekBlock positions c, a cursor of the blocks bucket, on the block that
// would hold a window of hash h, the last block whose key is <= h, and
// returns its key and value, or nil if there is no such block.
func SeekBlock(c *bolt.Cursor, h uint64) (k, v []byte) {
	kb := BlockKey(h)
	k, v = c.Seek(kb[:])
	if k == nil {
		return c.Last()
	}
	if KeyH(k) > h {
		return c.Prev()
	}
	return k, v
}

// Visitor receives the windows of a file: Format, if set, the file's
// format marker (Format or LegacyFormat) before anything else, Window each
// window (the slices are valid only during the call), Damaged each block
// (or, in a ratedb/1 file, record) that fails its checksum or structure.
type Visitor struct {
	Format  func(marker string)
	Window  func(key []byte, cs []record.Counter) error
	Damaged func(err error) error
}

// ForEach reads every window of the file tx sees, in the order of the file,
// whatever its format (ratedb/2, or ratedb/1 not yet migrated). It returns
// an error wrapping ErrFormat if the file is not a ratedb file.
func ForEach(tx *bolt.Tx, vis Visitor) error {
	mb := tx.Bucket(BucketMeta)
	if mb == nil {
		return fmt.Errorf("%w: no meta bucket", ErrFormat)
	}
	f := mb.Get(KeyFormat)
	if string(f) != string(Format) && !IsLegacy(f) {
		return fmt.Errorf("%w: unknown format marker", ErrFormat)
	}
	if vis.Format != nil {
		vis.Format(string(f))
	}
	if IsLegacy(f) {
		return forEachLegacy(tx, vis)
	}
	bb := tx.Bucket(BucketBlocks)
	if bb == nil {
		return fmt.Errorf("%w: no blocks bucket", ErrFormat)
	}
	var b record.Block
	return bb.ForEach(func(k, v []byte) error {
		if err := record.DecodeBlock(&b, k, v); err != nil {
			if vis.Damaged != nil {
				return vis.Damaged(err)
			}
			return nil
		}
		for _, w := range b.Windows {
			if err := vis.Window(w.Key, w.Counters); err != nil {
				return err
			}
		}
		return nil
	})
}

// Read opens the file at path read-only, waiting up to timeout for its lock
// (ErrInUse after that), and calls ForEach in one read transaction. A path
// that is not a regular file is ErrFormat (a named pipe would block the
// open); a page bbolt panics or faults on is ErrDamaged, not a crash. A file
// that cannot be opened (no read permission) is the open's *fs.PathError,
// not ErrFormat.
func Read(path string, timeout time.Duration, vis Visitor) error {
	return view(path, timeout, func(tx *bolt.Tx, f *os.File) error {
		// bbolt's cursors recurse or loop without end down a cycle in a
		// page tree: check the trees ForEach walks first.
		data, err := CheckTrees(tx, f)
		if err != nil {
			return err
		}
		if data != nil {
			return data
		}
		return ForEach(tx, vis)
	})
}

// Count returns the number of windows the file at path records in its meta
// bucket ("count", or a ratedb/1 file's "windows"), opening it as Read does
// (ErrInUse, ErrFormat, ErrDamaged as Read). Damage to the trees of windows
// does not prevent it: the count is what the file held before that damage
// made windows unreadable.
func Count(path string, timeout time.Duration) (n int64, err error) {
	err = view(path, timeout, func(tx *bolt.Tx, f *os.File) error {
		if _, err := CheckTrees(tx, f); err != nil {
			return err
		}
		mb := tx.Bucket(BucketMeta)
		if mb == nil {
			return fmt.Errorf("%w: no meta bucket", ErrFormat)
		}
		key := KeyCount
		switch fm := mb.Get(KeyFormat); {
		case IsLegacy(fm):
			key = LegacyKeyWindows
		case string(fm) != string(Format):
			return fmt.Errorf("%w: unknown format marker", ErrFormat)
		}
		v, ok := record.DecodeInt64(mb.Get(key))
		if !ok || v < 0 {
			return fmt.Errorf("%w: bad window count", ErrFormat)
		}
		n = v
		return nil
	})
	return n, err
}

// view opens the file at path read-only as Read describes and calls fn in
// one read transaction, with the file also open as f.
func view(path string, timeout time.Duration, fn func(tx *bolt.Tx, f *os.File) error) (err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file", ErrFormat)
	}
	if fi.Size() == 0 {
		// bbolt would try to write a new database into it, read-only.
		return fmt.Errorf("%w: an empty file", ErrFormat)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: reading it failed: %v", ErrDamaged, r)
		}
	}()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return ErrInUse
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "open" {
		// No read permission, say: that says nothing of its format.
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	defer bdb.Close()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return bdb.View(func(tx *bolt.Tx) error { return fn(tx, f) })
}
