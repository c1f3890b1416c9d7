package ratedb

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// auditFile checks the structure of the file Open has just opened (see
// pageAudit) and, if any page is damaged, rebuilds the file from its sound
// blocks before anything writes to it. It runs on its own goroutine, so
// Open does not read the whole file; Open takes snapMu for it and it
// releases it when done, so snapshots, janitor passes and Close wait for it.
// Hits go on meanwhile, reading windows from the file as usual. The same
// reads give the earliest expiry of every block (db.blocks), which the
// janitor needs.
func (db *DB) auditFile() {
	defer db.snapMu.Unlock()
	// A rebuild cut short by a crash leaves its new file behind; with
	// bbolt's lock held, no other handle is rebuilding this file now.
	if stale := rebuildLeftovers(db.path); len(stale) > 0 {
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
		// The blocks' earliest expiries come from the audit's reads:
		// bbolt's own reads of a damaged page can fault.
		damaged, db.blocks, err = db.auditPages(m)
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

// rebuildLeftovers returns the files that rebuilds of the file at path
// create: os.CreateTemp's "<name>.rebuild-*" in its directory, the '*' made
// decimal digits. It matches names as strings, not as a glob pattern (a
// path holding '[', '*', '?' or '\\' would match another file's rebuilds, or
// be no valid pattern at all), and only with digits after the prefix: a
// file named "<name>.rebuild-old" is an operator's, and the rebuild of a
// file named "<name>.rebuild-2" ("<name>.rebuild-2.rebuild-<digits>",
// perhaps under way) is another file's.
func rebuildLeftovers(path string) []string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p // rebuild writes beside the file a link points to
	}
	dir, prefix := filepath.Dir(path), filepath.Base(path)+".rebuild-"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		d, ok := strings.CutPrefix(e.Name(), prefix)
		if ok && d != "" && strings.Trim(d, "0123456789") == "" && e.Type().IsRegular() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// auditPages walks the file whose current meta is m and returns how many
// pages failed a check, and the blockIndex of the blocks it read.
func (db *DB) auditPages(m bmeta) (int, blockIndex, error) {
	f, err := os.Open(db.path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	a := newPageAudit(f, m)
	x := make(blockIndex)
	a.leaf = func(bucket string, k, v []byte) {
		if bucket == string(layout.BucketBlocks) {
			x.indexBlock(k, v)
		}
	}
	a.run(m.root)
	a.freelist(m.freelist)
	return a.damaged, x, a.err
}

// rebuild writes every window that lies in a sound place of the file whose
// meta is m, in a block that passes its checksum, into a new file (with the
// same secret), puts the new file in place of the old one, which it keeps as "<path>.corrupt-<unix-ms>", and
// switches the DB to it. snapMu held.
func (db *DB) rebuild(m bmeta, damaged int) (err error) {
	started := time.Now()
	if testRebuildHook != nil {
		if err := testRebuildHook(); err != nil {
			return err
		}
	}
	// The file itself, not a symbolic link to it: the new file is renamed
	// over it, and renaming over the link would replace the link with a
	// file in the link's directory (other storage, perhaps, or read-only).
	path, err := filepath.EvalSymlinks(db.path)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tmpf, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".rebuild-*")
	if err != nil {
		return err
	}
	tmp := tmpf.Name()
	// The new file keeps the old one's permissions (CreateTemp makes
	// 0600): a group that could read the file still can.
	if st, err := f.Stat(); err == nil {
		_ = tmpf.Chmod(st.Mode().Perm())
	}
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
	// The new file keeps the old one's secret: windows in memory keep the
	// file hash of their record keys (see keepFileHash), which must stay
	// right across the rebuild, and db.secret never changes while the DB
	// is open.
	if err := nb.Update(func(tx *bolt.Tx) error { return initFileWith(tx, db.secret.Bytes()) }); err != nil {
		return err
	}

	// Every window of every block that passes its checksum, wherever the
	// walk finds it; a damaged block is counted and its windows are lost.
	var (
		set changeSet
		bad int64
		blk record.Block
	)
	secret := db.secret
	a := newPageAudit(f, m)
	a.leaf = func(bucket string, k, v []byte) {
		if bucket != string(layout.BucketBlocks) {
			return
		}
		if err := record.DecodeBlock(&blk, k, v); err != nil {
			bad++
			return
		}
		for _, w := range blk.Windows {
			set.add(secret, w.Key, "", w.Counters)
		}
	}
	a.run(m.root)
	if a.err != nil {
		return a.err
	}
	salvage(&set)
	recs := set.changes
	blocks := make(blockIndex)
	var kept int64
	for len(recs) > 0 {
		batch := recs[:min(len(recs), snapshotBatch)]
		var (
			sl slab
			w  *blockWriter
		)
		err := nb.Update(func(tx *bolt.Tx) error {
			sl = slab{}
			var err error
			if w, err = newBlockWriter(tx, secret, blocks, &sl); err != nil {
				return err
			}
			if _, err := w.write(&set, batch, math.MaxInt64); err != nil {
				return err
			}
			return putCount(tx, kept+w.delta)
		})
		if err != nil {
			return err
		}
		blocks.apply(w.edits)
		kept += w.delta
		recs = recs[len(batch):]
	}
	if err := nb.Sync(); err != nil {
		return err
	}

	// Switch names and handles together: a reader under boltMu finds the
	// file at db.path that db.bolt has open (Verify relies on it).
	aside := path + ".corrupt-" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	db.boltMu.Lock()
	if err := os.Link(path, aside); err != nil {
		db.boltMu.Unlock()
		return err
	}
	// The new file keeps bbolt's lock across the rename: the lock belongs to
	// the open file, not to its name.
	if err := os.Rename(tmp, path); err != nil {
		db.boltMu.Unlock()
		_ = os.Remove(aside)
		return err
	}
	old := db.bolt
	db.bolt, db.blocks = nb, blocks
	db.treeDamaged.Store(false)
	db.dropPresence()
	db.boltMu.Unlock()
	_ = old.Close()
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	db.stats.diskWindows.Store(kept)
	db.stats.corrupt.Add(int64(damaged) + bad)
	db.log.Error("ratedb: the database file had damaged pages: rebuilt it from its sound blocks of windows; "+
		"windows in damaged places are lost", "path", db.path, "moved_to", aside,
		"damaged_pages", damaged, "damaged_blocks", bad, "windows_kept", kept, "took", time.Since(started))
	return nil
}

// testRebuildHook, when set by a test, runs as rebuild starts; an error it
// returns fails the rebuild.
var testRebuildHook func() error

// salvage keeps one window of each record key in set: damage can leave
// two copies of one key (a stale copy reached through a damaged branch), and
// what allows less wins, tier by tier: of each tier's two counters, the
// later window end, then the larger count. (Chosen whole, a Layered
// window's stale copy could win on a shorter tier's ended window and give
// its longer tiers back hits they had counted.) Copies whose numbers of
// tiers differ, which no sound block holds, are chosen whole: the later
// end, then the larger total. It leaves the windows in the file's order.
func salvage(set *changeSet) {
	slices.SortFunc(set.changes, func(a, b change) int {
		if c := bytes.Compare(set.key(&a), set.key(&b)); c != 0 {
			return c
		}
		ac, bc := set.counters(&a), set.counters(&b)
		if c := cmp.Compare(record.MaxEnd(bc), record.MaxEnd(ac)); c != 0 {
			return c
		}
		return cmp.Compare(total(bc), total(ac))
	})
	out := set.changes[:0]
	for i := range set.changes {
		if n := len(out); n > 0 && bytes.Equal(set.key(&out[n-1]), set.key(&set.changes[i])) {
			mergeTiers(set.counters(&out[n-1]), set.counters(&set.changes[i]))
			continue
		}
		out = append(out, set.changes[i])
	}
	set.changes = out
	set.sort()
}

// mergeTiers sets each counter of kept that other's counter of the same
// tier is newer than (a later end, or the same end and a larger count) to
// other's. kept and other are two copies of one window; if their numbers of
// tiers differ, kept stays as it is.
func mergeTiers(kept, other []counter) {
	if len(kept) != len(other) {
		return
	}
	for i, o := range other {
		if o.End > kept[i].End || o.End == kept[i].End && o.Count > kept[i].Count {
			kept[i] = o
		}
	}
}

func total(cs []counter) int64 {
	var t int64
	for _, c := range cs {
		t += c.Count
	}
	return t
}
