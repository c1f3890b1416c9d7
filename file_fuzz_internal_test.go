package ratedb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/fixture"
)

// FuzzOpenFile feeds Open whole files: a small ratedb/2 file, the ratedb/1
// fixture and what the fuzzer makes of them, each meta page's checksum made
// right (reseal), so that validateFile's reading of the meta pages (page
// size, root, freelist, high-water mark) and everything behind it is
// reached. Open either fails with an error wrapping ErrCorrupt or opens the
// file; an opened file takes a hit, a Verify and a Close (which may report
// ErrCorrupt), and nothing panics.
func FuzzOpenFile(f *testing.F) {
	now := time.UnixMilli(1_767_225_600_000)
	dir := f.TempDir()
	seed := filepath.Join(dir, "seed.db")
	fillFile(f, seed, now, 40)
	for _, p := range []string{seed, fixture.Format1(f)} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		m, _, err := validateFile(p)
		if err != nil {
			f.Fatal(err)
		}
		// The pages past the high-water mark are bbolt's slack.
		f.Add(data[:m.pgid*uint64(m.pageSize)], false)
		f.Add(data[:m.pgid*uint64(m.pageSize)], true)
	}
	work := filepath.Join(dir, "work")
	path := filepath.Join(work, "rate.db")
	f.Fuzz(func(t *testing.T, data []byte, reseal bool) {
		if len(data) > 1<<17 {
			return
		}
		if reseal {
			data = bytes.Clone(data)
			for _, off := range []int{0, 4096} {
				if len(data) >= off+pageHeader+metaLen {
					p := data[off+pageHeader:]
					h := fnv.New64a()
					_, _ = h.Write(p[:56])
					binary.LittleEndian.PutUint64(p[56:], h.Sum64())
				}
			}
		}
		// A rebuild keeps the damaged file beside it: start afresh.
		if err := errors.Join(os.RemoveAll(work), os.Mkdir(work, 0o700)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := Open(path, &Options{Clock: func() time.Time { return now }, SnapshotPeriod: -1, CleanPeriod: -1,
			MaxHotKeys: 1000, NoSync: true, OpenTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, not ErrCorrupt", err)
			}
			return
		}
		w, err := db.Window(FixedWindow, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Hit(context.Background(), "audit-key-0001", 1, 1); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Hit = %v", err)
		}
		if err := db.Verify(); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Verify = %v", err)
		}
		if err := db.Close(); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Close = %v", err)
		}
	})
}
