package ratedb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// FuzzMigrateRecord feeds the ratedb/1 migration a file holding a sound
// record and one record of any key and value (its checksum made right when
// reseal is set, so that what lies behind it is reached): Open never fails
// or panics on it, the sound window keeps its count, every record is either
// a window of the new file or counted in CorruptSkipped, the file verifies,
// and it opens again with that window intact.
func FuzzMigrateRecord(f *testing.F) {
	now := fixtureBase
	hourEnd, minuteEnd := now.UnixMilli()+3_600_000, now.UnixMilli()+60_000
	sound := append(specPrefix(FixedWindow, []int64{3_600_000}, false), "sound"...)
	add := func(k []byte, cs []counter) {
		f.Add(k, record.AppendValue(nil, k, cs), false)
	}
	add(append(specPrefix(FixedWindow, []int64{3_600_000}, false), "a"...), []counter{{Count: 3, End: hourEnd}})
	add(append(specPrefix(PerKeyWindow, []int64{60_000}, false), "b"...), []counter{{Count: 1, End: minuteEnd}})
	old := specPrefix(FixedWindow, []int64{3_600_000, 60_000}, true)
	add(append(old, "c"...), []counter{{Count: 7, End: hourEnd}, {Count: 2, End: minuteEnd}})
	add(append(old, "d"...), []counter{{Count: 1, End: hourEnd}})
	add(append(specPrefix(FixedWindow, []int64{20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, true), "e"...), []counter{{Count: 1, End: hourEnd}})
	add(specPrefix(FixedWindow, []int64{-1, -2}, true), []counter{{Count: 1, End: 1}, {Count: 1, End: -1}})
	add([]byte{0x80 | 9, 2, 0, 0}, []counter{{Count: 1, End: hourEnd}, {Count: 1, End: hourEnd}})
	add([]byte{0xff}, []counter{{Count: 1 << 62, End: 1 << 62}})
	f.Add([]byte("x"), []byte{1, 1}, true)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, key, v []byte, reseal bool) {
		if len(key) == 0 || len(key) > 512 || bytes.Equal(key, sound) || len(v) > 1024 {
			return // bbolt refuses an empty key; the sound record's key is taken
		}
		if reseal && len(v) >= 4 {
			body := v[:len(v)-4]
			sum := crc32.Update(crc32.Checksum(key, crc32.MakeTable(crc32.Castagnoli)), crc32.MakeTable(crc32.Castagnoli), body)
			v = binary.BigEndian.AppendUint32(bytes.Clone(body), sum)
		}
		path := filepath.Join(dir, "rate.db")
		_ = os.Remove(path)
		bdb, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		err = bdb.Update(func(tx *bolt.Tx) error {
			mb, _ := tx.CreateBucket(layout.BucketMeta)
			wb, _ := tx.CreateBucket(layout.LegacyBucketWindows)
			xb, _ := tx.CreateBucket(layout.LegacyBucketIndex)
			_ = mb.Put(layout.KeyFormat, layout.LegacyFormat)
			_ = mb.Put(layout.LegacyKeyWindows, record.EncodeInt64(2))
			_ = mb.Put(layout.LegacyKeyHWM, record.EncodeInt64(0))
			cs := []counter{{Count: 7, End: hourEnd}}
			if err := wb.Put(sound, record.AppendValue(nil, sound, cs)); err != nil {
				return err
			}
			if err := xb.Put(record.AppendIndexKey(nil, hourEnd, sound), nil); err != nil {
				return err
			}
			return wb.Put(key, v)
		})
		if err := errors.Join(err, bdb.Close()); err != nil {
			t.Fatal(err)
		}
		opts := &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 1000, NoSync: true}
		check := func(reopened bool) {
			db, err := Open(path, opts)
			if err != nil {
				t.Fatalf("Open (reopened %v): %v", reopened, err)
			}
			defer db.Close()
			st := db.Stats()
			if !reopened && st.WindowsOnDisk+st.CorruptSkipped != 2 {
				t.Fatalf("%d windows and %d skipped, of 2 records", st.WindowsOnDisk, st.CorruptSkipped)
			}
			w, err := db.Window(FixedWindow, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := w.Get(context.Background(), "sound"); err != nil || got != 7 {
				t.Fatalf("the sound window reads %d, %v (reopened %v)", got, err, reopened)
			}
			if err := db.Verify(); err != nil {
				t.Fatalf("Verify (reopened %v): %v", reopened, err)
			}
			if err := db.Close(); err != nil {
				t.Fatalf("Close (reopened %v): %v", reopened, err)
			}
		}
		check(false)
		check(true)
	})
}
