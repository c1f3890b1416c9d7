package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// windowsFile writes a state file at path of n keys ("key-%07d", in no
// order) counted in a one-hour fixed window, every third also in a
// one-minute per-key window and every fifth in a layered limiter (one key
// under several limiters: inspect lists them in the file's order), at now.
func windowsFile(t *testing.T, path string, n int, now time.Time) {
	t.Helper()
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1,
		Clock: func() time.Time { return now }})
	require.NoError(t, err)
	ctx := context.Background()
	fw, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	pk, err := db.Window(ratedb.PerKeyWindow, time.Minute)
	require.NoError(t, err)
	ly, err := db.Layered(ratedb.FixedWindow, ratedb.Tier{Scale: time.Second, Limit: 10}, ratedb.Tier{Scale: time.Hour, Limit: 100})
	require.NoError(t, err)
	for i := range n {
		k := fmt.Sprintf("key-%07d", (i*7919)%n)
		_, err := fw.Hit(ctx, k, 100, int64(i%7+1))
		require.NoError(t, err)
		if i%3 == 0 {
			_, err = pk.Hit(ctx, k, 100, 1)
			require.NoError(t, err)
		}
		if i%5 == 0 {
			_, err = ly.Hit(ctx, k, 1)
			require.NoError(t, err)
		}
	}
	require.NoError(t, db.Close())
}

// withSortBudget sets sortBudget to b for the test.
func withSortBudget(t *testing.T, b int) {
	old := sortBudget
	sortBudget = b
	t.Cleanup(func() { sortBudget = old })
}

// listed runs List on path and writes it with write.
func listed(t *testing.T, path, prefix string, now time.Time, write func(io.Writer, *Listing) error) string {
	t.Helper()
	l, err := List(path, prefix, now)
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, write(&b, l))
	require.NoError(t, l.Close())
	return b.String()
}

// inspect's output does not depend on how many windows it sorts in memory:
// sorted in many temporary files and merged, they come out as one sort
// (keys in order, one key's windows in the file's order), in text and in
// JSON, whole or under a prefix; and the JSON is what encoding/json's
// Encoder writes of {"summary":...,"windows":[...]}, as it was when
// inspect held every window and encoded them at once.
func TestInspectOutputIsTheSameSortedInTemporaryFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	windowsFile(t, path, 3_000, now)
	at := now.Add(30 * time.Second) // the one-second tiers have ended
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, prefix := range []string{"", "key-00001", "none"} {
		for name, write := range map[string]func(io.Writer, *Listing) error{"text": WriteText, "json": WriteJSON} {
			withSortBudget(t, math.MaxInt)
			want := listed(t, path, prefix, at, write)
			withSortBudget(t, 2<<10) // a few dozen windows a file
			got := listed(t, path, prefix, at, write)
			sameLines(t, want, got, "%s, prefix %q", name, prefix)
			if name == "json" {
				ws, sum, err := Inspect(path, prefix, at)
				require.NoError(t, err)
				if ws == nil {
					ws = []Window{}
				}
				var b bytes.Buffer
				enc := json.NewEncoder(&b)
				enc.SetIndent("", "  ")
				require.NoError(t, enc.Encode(map[string]any{"windows": ws, "summary": sum}))
				sameLines(t, b.String(), got, "json as encoding/json writes it, prefix %q", prefix)
			}
		}
	}
	// Sorted by key; one key's windows under its three limiters.
	lines := strings.Split(strings.TrimSuffix(listed(t, path, "", at, WriteText), "\n"), "\n")
	require.Len(t, lines, 4600+1)
	assert.Equal(t, "summary: 4600 records, 4600 listed (4600 live, 0 expired), 0 unreadable; format ratedb/2", lines[4600])
	keys := make([]string, 4600)
	for i, l := range lines[:4600] {
		keys[i], _, _ = strings.Cut(l, "\t")
	}
	assert.True(t, slices.IsSorted(keys), "sorted by key")
	assert.Equal(t, []string{"key-0000000", "key-0000000", "key-0000000", "key-0000001"}, keys[:4])
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, left, "temporary files left behind")
}

// sameLines fails t, naming the first line that differs, if got is not
// want.
func sameLines(t *testing.T, want, got string, msg string, args ...any) {
	t.Helper()
	if got == want {
		return
	}
	w, g := strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")
	i := 0
	for i < min(len(w), len(g)) && w[i] == g[i] {
		i++
	}
	at := func(l []string) string {
		if i < len(l) {
			return l[i]
		}
		return "(end)"
	}
	t.Errorf("%s: line %d is %q, want %q", fmt.Sprintf(msg, args...), i+1, at(g), at(w))
}

// inspect holds a bounded number of windows in memory, whatever the
// number in the file: it held them all, as Windows, then the whole output
// at once (1,000,000 windows took 0.7 GB resident, 1.7 GB with --json).
// The live heap is measured at each write of the output, once List has
// read the file: here it stays under 2 MB; with every window in memory
// (sortBudget unbounded, or the code before List) it is over 20 MB.
func TestInspectMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a file of 200,000 windows")
	}
	path := filepath.Join(t.TempDir(), "s.db")
	now := time.Now()
	const n = 200_000
	manyWindows(t, path, n, now)
	t.Setenv("TMPDIR", t.TempDir())
	withSortBudget(t, 1<<20)

	runtime.GC()
	runtime.GC() // and what sync.Pools kept through the first
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	l, err := List(path, "", now)
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, n, l.Summary.Listed)
	mw := &heapWriter{}
	require.NoError(t, WriteText(mw, l))
	require.Greater(t, mw.writes, 10, "the output is written as it is made")
	grown := int64(mw.peak) - int64(base)
	t.Logf("live heap grew by %d KB at most (from %d KB), over %d writes", grown>>10, base>>10, mw.writes)
	assert.Less(t, grown, int64(8<<20), "the live heap grew with the windows")
}

// manyWindows writes a state file at path of n keys counted in a one-hour
// fixed window at now (the DB it opens is unreachable once it returns).
func manyWindows(t *testing.T, path string, n int, now time.Time) {
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1, MaxHotKeys: 1024,
		Clock: func() time.Time { return now }})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	for i := range n {
		_, err := w.Inc(context.Background(), fmt.Sprintf("client-%07d", i), 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
}

// heapWriter discards what it is given and records the live heap (after a
// collection) at each write.
type heapWriter struct {
	peak   uint64
	writes int
}

func (h *heapWriter) Write(p []byte) (int, error) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.peak = max(h.peak, ms.HeapAlloc)
	h.writes++
	return len(p), nil
}
