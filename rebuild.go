package ratedb

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// auditFile checks the structure of the file Open has just opened (see
// pageAudit) and, if any page is damaged, rebuilds the file from its sound
// records before anything writes to it. It runs on its own goroutine, so
// Open does not read the whole file; Open takes snapMu for it and it
// releases it when done, so snapshots, janitor passes and Close wait for it.
// Hits go on meanwhile, reading windows from the file as usual.
func (db *DB) auditFile() {
	defer db.snapMu.Unlock()
	// A rebuild cut short by a crash leaves its new file behind; with
	// bbolt's lock held, no other handle is rebuilding this file now.
	if stale, _ := filepath.Glob(db.path + ".rebuild-*"); len(stale) > 0 {
		for _, p := range stale {
			_ = os.Remove(p)
		}
		db.log.Warn("ratedb: removed files left by a rebuild that did not finish", "path", db.path, "files", len(stale))
	}
	// bbolt holds the file's lock and nothing has written to it since
	// Open validated it: its meta page is the one bbolt uses.
	m, _, err := validateFile(db.path)
	var damaged int
	if err == nil {
		damaged, err = db.auditPages(m)
	}
	if err != nil {
		db.fileErr = fmt.Errorf("ratedb: checking the file: %w", err)
		db.log.Error("ratedb: could not check the database file; not writing to it", "path", db.path, "err", err)
		return
	}
	if damaged == 0 {
		return
	}
	if err := db.rebuild(m, damaged); err != nil {
		db.fileErr = fmt.Errorf("%w: the file has damaged pages and could not be rebuilt: %v", ErrCorrupt, err)
		db.log.Error("ratedb: the database file has damaged pages and could not be rebuilt; not writing to it: "+
			"counts go on in memory and snapshots fail", "path", db.path, "err", err)
	}
}

// auditPages walks the file whose current meta is m and returns how many
// pages failed a check.
func (db *DB) auditPages(m bmeta) (int, error) {
	f, err := os.Open(db.path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	a := newPageAudit(f, m)
	a.run(m.root)
	a.freelist(m.freelist)
	return a.damaged, a.err
}

// rebuild writes every window record that lies in a sound place of the file
// whose meta is m and passes its checksum into a new file, puts the new file
// in place of the old one, which it keeps as "<path>.corrupt-<unix-ms>", and
// switches the DB to it. snapMu held.
func (db *DB) rebuild(m bmeta, damaged int) (err error) {
	started := time.Now()
	if testRebuildHook != nil {
		if err := testRebuildHook(); err != nil {
			return err
		}
	}
	f, err := os.Open(db.path)
	if err != nil {
		return err
	}
	defer f.Close()
	tmpf, err := os.CreateTemp(filepath.Dir(db.path), filepath.Base(db.path)+".rebuild-*")
	if err != nil {
		return err
	}
	tmp := tmpf.Name()
	_ = tmpf.Close()
	nb, err := openBolt(tmp, db.opts.OpenTimeout, db.opts.NoSync)
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	defer func() {
		if err != nil {
			_ = nb.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := nb.Update(initFile); err != nil {
		return err
	}

	var (
		batch      []salvaged
		sl         slab
		kept, bad  int64
		buf        [record.MaxTiers]counter
		flushError error
	)
	flush := func() {
		if len(batch) == 0 || flushError != nil {
			return
		}
		n, err := writeSalvaged(nb, batch)
		kept += n
		flushError = err
		batch, sl = batch[:0], slab{}
	}
	a := newPageAudit(f, m)
	a.leaf = func(bucket string, k, v []byte) {
		if bucket != string(bucketWindows) {
			return
		}
		cs, err := record.Decode(buf[:0], k, v, record.AnyTiers)
		if err != nil {
			bad++
			return
		}
		b := sl.alloc(len(k) + len(v))
		copy(b, k)
		copy(b[len(k):], v)
		batch = append(batch, salvaged{k: b[:len(k):len(k)], v: b[len(k):], end: record.MaxEnd(cs), total: total(cs)})
		if len(batch) >= snapshotBatch {
			flush()
		}
	}
	a.run(m.root)
	flush()
	if a.err != nil {
		return a.err
	}
	if flushError != nil {
		return flushError
	}
	if err := nb.Sync(); err != nil {
		return err
	}

	// Switch names and handles together: a reader under boltMu finds the
	// file at db.path that db.bolt has open (Verify relies on it).
	aside := db.path + ".corrupt-" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	db.boltMu.Lock()
	if err := os.Link(db.path, aside); err != nil {
		db.boltMu.Unlock()
		return err
	}
	// The new file keeps bbolt's lock across the rename: the lock belongs to
	// the open file, not to its name.
	if err := os.Rename(tmp, db.path); err != nil {
		db.boltMu.Unlock()
		_ = os.Remove(aside)
		return err
	}
	old := db.bolt
	db.bolt = nb
	db.boltMu.Unlock()
	_ = old.Close()
	if d, err := os.Open(filepath.Dir(db.path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	db.stats.diskWindows.Store(kept)
	db.stats.corrupt.Add(int64(damaged) + bad)
	db.log.Error("ratedb: the database file had damaged pages: rebuilt it from its sound window records; "+
		"windows in damaged places are lost", "path", db.path, "moved_to", aside,
		"damaged_pages", damaged, "damaged_records", bad, "windows_kept", kept, "took", time.Since(started))
	return nil
}

// testRebuildHook, when set by a test, runs as rebuild starts; an error it
// returns fails the rebuild.
var testRebuildHook func() error

// salvaged is a window record found by rebuild.
type salvaged struct {
	k, v  []byte
	end   int64 // record.MaxEnd of its counters
	total int64 // sum of its counts
}

func total(cs []counter) int64 {
	var t int64
	for _, c := range cs {
		t += c.Count
	}
	return t
}

// writeSalvaged writes recs into nb in one transaction and returns how many
// new windows it added. Damage can leave two records of one key (a stale
// copy reached through a damaged branch); the one that allows less wins: the
// later window end, then the larger count.
func writeSalvaged(nb *bolt.DB, recs []salvaged) (added int64, err error) {
	slices.SortFunc(recs, func(a, b salvaged) int { return bytes.Compare(a.k, b.k) })
	err = nb.Update(func(tx *bolt.Tx) error {
		added = 0
		wb, xb, mb := tx.Bucket(bucketWindows), tx.Bucket(bucketIndex), tx.Bucket(bucketMeta)
		var buf [record.MaxTiers]counter
		var scratch []byte
		for i := range recs {
			r := &recs[i]
			if old := wb.Get(r.k); old != nil {
				cs, err := record.Decode(buf[:0], r.k, old, record.AnyTiers)
				if err == nil {
					oldEnd := record.MaxEnd(cs)
					if oldEnd > r.end || (oldEnd == r.end && total(cs) >= r.total) {
						continue
					}
					scratch = record.AppendIndexKey(scratch[:0], oldEnd, r.k)
					if err := xb.Delete(scratch); err != nil {
						return err
					}
				}
			} else {
				added++
			}
			if err := wb.Put(r.k, r.v); err != nil {
				return err
			}
			if err := xb.Put(record.AppendIndexKey(nil, r.end, r.k), nil); err != nil {
				return err
			}
		}
		n, _ := record.DecodeInt64(mb.Get(keyWindows))
		return mb.Put(keyWindows, record.EncodeInt64(n+added))
	})
	return added, err
}
