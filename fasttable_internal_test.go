package ratedb

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fastMatch may report a slot whose tag differs, but never misses one whose
// tag is equal.
func TestFastMatchNoFalseNegatives(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		tags := r.Uint64() & 0x00ffffffffffffff
		tag := r.Uint64() >> 56
		if r.IntN(2) == 0 { // plant the tag in a few slots
			for range 1 + r.IntN(3) {
				i := uint(r.IntN(fastWays))
				tags = tags&^(0xff<<(8*i)) | tag<<(8*i)
			}
		}
		m := fastMatch(tags, tag)
		for i := range uint(fastWays) {
			if (tags>>(8*i))&0xff == tag {
				require.NotZero(t, m&(0x80<<(8*i)), "tags %#x tag %#x slot %d", tags, tag, i)
			}
		}
		assert.Zero(t, m&^0x0080808080808080, "only the fastWays slots' top bits")
	}
}

func TestFastTableSize(t *testing.T) {
	assert.Equal(t, 64, fastTableSize(1))
	assert.Equal(t, 299_594, fastTableSize(1<<20)) // about two slots a window
	assert.Equal(t, 1<<19, fastTableSize(MaxHotKeysLimit))
}

// Entries stored in the fast table are found again by their own spec and
// key only, also when every entry shares one bucket and one tag; a bucket
// that overflows loses entries (they take the shard map), never mixes them
// up.
func TestFastTableFindsOnlyItsOwn(t *testing.T) {
	db, err := Open("", &Options{MaxHotKeys: 64})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s, err := db.specFor(FixedWindow, []int64{60_000}, false)
	require.NoError(t, err)
	other, err := db.specFor(FixedWindow, []int64{1_000}, false)
	require.NoError(t, err)

	const h = 0xab_0000_0000_0000_07 // one hash for every key: one bucket, one tag
	var es []*entry
	for i := range fastWays + 3 {
		e := s.newEntry(fmt.Sprint("k", i), []counter{{}})
		e.hot.Store(true)
		db.fastStore(h, e)
		es = append(es, e)
	}
	found := 0
	for i, e := range es {
		got := db.fastFind(h, s, e.key)
		if got != nil {
			require.Same(t, e, got, "key %d", i)
			found++
		}
		assert.Nil(t, db.fastFind(h, other, e.key), "another spec's key")
	}
	assert.Equal(t, fastWays, found, "a full bucket holds fastWays entries")
	assert.Nil(t, db.fastFind(h, s, "absent"))
	// A new entry in a full bucket replaces one that left the cache.
	es[len(es)-1].hot.Store(false)
	for _, e := range es {
		if db.fastFind(h, s, e.key) == e {
			e.hot.Store(false)
			break
		}
	}
	n := s.newEntry("new", []counter{{}})
	n.hot.Store(true)
	db.fastStore(h, n)
	assert.Same(t, n, db.fastFind(h, s, "new"))
	// Storing an entry again keeps one slot for it.
	db.fastStore(h, n)
	b, _ := db.fastBucketOf(h)
	held := 0
	for i := range fastWays {
		if b.slots[i].Load() == n {
			held++
		}
	}
	assert.Equal(t, 1, held)
}

// The fast table starts small and grows with the windows in memory, to at
// most the size for MaxHotKeys; windows it held before growing are found
// again (through the shard map once, then the new table), and every count
// stays exact.
func TestFastTableGrows(t *testing.T) {
	db, err := Open("", &Options{MaxHotKeys: 1 << 17})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	w, err := db.Window(PerKeyWindow, time.Hour) // the real clock: no hour boundary splits the rounds
	require.NoError(t, err)
	ctx := context.Background()
	assert.Equal(t, fastTableSize(fastInitWindows), len(db.fast.Load().b), "the first table")

	const n = 50_000
	sizes := map[int]bool{}
	for round := int64(1); round <= 3; round++ {
		for i := range n {
			// Twice: a window's second use puts it in the cache, and a
			// hot window in the table.
			_, err := w.Inc(ctx, fmt.Sprint("k", i), 1)
			require.NoError(t, err)
			got, err := w.Inc(ctx, fmt.Sprint("k", i), 1)
			require.NoError(t, err)
			require.Equal(t, 2*round, got, "key %d", i)
			sizes[len(db.fast.Load().b)] = true
		}
	}
	final := len(db.fast.Load().b)
	assert.GreaterOrEqual(t, final, fastTableSize(n), "about two slots a window")
	assert.LessOrEqual(t, final, fastTableSize(4*n))
	assert.Greater(t, len(sizes), 2, "it grew in steps")

	// Hits on the grown table are served by it: a key found there takes
	// neither the shard map nor the cache.
	db.cache.Wait()
	served := 0
	for i := range n {
		k := fmt.Sprint("k", i)
		s, err := db.specFor(PerKeyWindow, []int64{time.Hour.Milliseconds()}, false)
		require.NoError(t, err)
		if db.fastFind(s.hash(k), s, k) != nil {
			served++
		}
	}
	assert.Greater(t, served, n*9/10, "most windows are in the grown table")

	// The table never outgrows the size for MaxHotKeys.
	for i := range 3 << 17 {
		for range 2 {
			_, err := w.Inc(ctx, fmt.Sprint("x", i), 1)
			require.NoError(t, err)
		}
	}
	assert.Equal(t, fastTableSize(1<<17), len(db.fast.Load().b))
	assert.Equal(t, int64(math.MaxInt64), db.fast.Load().grow)
}

// TestFastTableForgetsARemovedEntry: a hot entry the janitor removes gives
// up its fast-table slot, so the key's next entry is found there, not the
// removed one ahead of it (every hit then took the slow path).
func TestFastTableForgetsARemovedEntry(t *testing.T) {
	clk := &settableClock{t: time.UnixMilli(1_767_225_600_000)}
	db, err := Open("", &Options{Clock: clk.Now, SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(FixedWindow, time.Second)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = w.Hit(ctx, "k", 10, 1)
	require.NoError(t, err)
	db.cache.Wait()
	clk.Set(clk.Now().Add(2 * time.Second))
	n, err := db.Clean()
	require.NoError(t, err)
	require.Equal(t, 1, n, "the janitor removed the window")
	for range 3 {
		_, err = w.Hit(ctx, "k", 10, 1)
		require.NoError(t, err)
		db.cache.Wait()
	}
	e := db.fastFind(w.hash("k"), w.spec, "k")
	require.NotNil(t, e)
	e.mu.Lock()
	gone := e.gone
	e.mu.Unlock()
	assert.False(t, gone, "the fast table returned the removed entry ahead of the live one")
}
