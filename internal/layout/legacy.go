package layout

import (
	"fmt"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// Format ratedb/1, read only to migrate it (and by the file tools): the
// buckets meta ("format" = "ratedb/1", "windows" = the window count, "hwm"),
// windows (one record per window: record key -> record.AppendValue) and
// index (expiry index: record.AppendIndexKey -> nil).
var (
	LegacyBucketWindows = []byte("windows")
	LegacyBucketIndex   = []byte("index")
	LegacyKeyWindows    = []byte("windows")
	LegacyKeyHWM        = []byte("hwm")
	LegacyFormat        = []byte("ratedb/1")
)

// IsLegacy reports whether the format marker f is that of format ratedb/1.
func IsLegacy(f []byte) bool { return string(f) == string(LegacyFormat) }

// forEachLegacy reads every window record of a ratedb/1 file.
func forEachLegacy(tx *bolt.Tx, vis Visitor) error {
	wb := tx.Bucket(LegacyBucketWindows)
	if wb == nil {
		return fmt.Errorf("%w: no windows bucket", ErrFormat)
	}
	var buf [record.MaxTiers]record.Counter
	return wb.ForEach(func(k, v []byte) error {
		cs, err := record.Decode(buf[:0], k, v, record.AnyTiers)
		if err != nil {
			if vis.Damaged != nil {
				return vis.Damaged(err)
			}
			return nil
		}
		return vis.Window(k, cs)
	})
}
