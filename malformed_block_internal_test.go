package ratedb

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// A block whose checksum holds but whose structure does not (bytes left
// after its last window: a bug or a crafted value) is damaged for the whole
// of ratedb: the audit files it as damaged, and the janitor deletes it
// without counting its windows. A look-up and the janitor's leftInFile read
// it with FindInBlock, which stopped at the window it looked for: the
// look-up loaded a window of it into memory, and leftInFile said an expired
// window of it was left for a later pass to count, which that pass (seeing
// the block damaged) never did, so Stats.Cleaned missed it.
func TestMalformedBlockIsDamagedForLookups(t *testing.T) {
	now := time.UnixMilli(1_767_225_600_000)
	path := filepath.Join(t.TempDir(), "rate.db")
	db, w := openWindow(t, path, now)
	prefix := w.prefix
	require.NoError(t, db.Close())

	expired := append(append([]byte(nil), prefix...), "expired"...)
	live := append(append([]byte(nil), prefix...), "live"...)
	bk := layout.BlockKey(0)
	sound := record.AppendBlock(nil, bk[:], []record.BlockWindow{
		{Key: expired, Counters: []record.Counter{{Count: 2, End: now.UnixMilli() - 1000}}},
		{Key: live, Counters: []record.Counter{{Count: 3, End: now.UnixMilli() + 1000}}},
	})
	body := append(append([]byte(nil), sound[:len(sound)-4]...), 0x01) // a stray byte after the last window
	sum := crc32.Update(crc32.Checksum(bk[:], crc32.MakeTable(crc32.Castagnoli)), crc32.MakeTable(crc32.Castagnoli), body)
	bad := binary.BigEndian.AppendUint32(body, sum)
	var b record.Block
	require.ErrorIs(t, record.DecodeBlock(&b, bk[:], bad), record.ErrBlock, "the checksum holds, the structure does not")

	bdb, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(layout.BucketBlocks).Put(bk[:], bad)
	}))
	require.NoError(t, bdb.Close())

	db, w = openWindow(t, path, now)
	defer db.Close()
	require.NoError(t, db.Snapshot()) // the audit after Open is done
	before := db.Stats().CorruptSkipped

	// A look-up skips the block and counts it, as for a block that fails
	// its checksum.
	n, err := w.Get(context.Background(), "live")
	require.NoError(t, err)
	assert.Zero(t, n, "a window read from a damaged block")
	assert.Equal(t, before+1, db.Stats().CorruptSkipped)

	// leftInFile, after a failed pass took "expired" out of memory: no
	// later pass counts it, since the janitor deletes the damaged block
	// without counting its windows.
	db.snapMu.Lock()
	left := db.leftInFile(now.UnixMilli(), map[string]struct{}{string(expired): {}})
	db.snapMu.Unlock()
	assert.Zero(t, left, "a window of a damaged block said to be left for a later pass")
	removed, err := db.Clean()
	require.NoError(t, err)
	assert.Zero(t, removed, "the janitor counted a window of a damaged block")
	require.NoError(t, db.view(func(tx *bolt.Tx) error {
		assert.Nil(t, tx.Bucket(layout.BucketBlocks).Get(bk[:]), "the janitor deletes the damaged block")
		return nil
	}))
}
