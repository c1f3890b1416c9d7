package ratedb

import (
	"fmt"

	"github.com/ratedb/ratedb/internal/record"
	bolt "go.etcd.io/bbolt"
)

// saveHWM writes the newest time seen to the file if the file holds an
// older one. A snapshot writes it only when some window changed, so without
// this a graceful Close after an idle stretch would leave an older time in
// the file, and a clock that reads earlier after the restart would reopen
// windows that had already ended (found by TestModel, seed 46; see
// TestCloseKeepsTimeWhenIdle).
func (db *DB) saveHWM() error {
	if !db.persist {
		return nil
	}
	db.snapMu.Lock()
	defer db.snapMu.Unlock()
	hwm := db.hwm.Load()
	stale := false
	err := db.view(func(tx *bolt.Tx) error {
		mb := tx.Bucket(bucketMeta)
		if mb == nil {
			return fmt.Errorf("%w: missing bucket", ErrCorrupt)
		}
		old, ok := record.DecodeInt64(mb.Get(keyHWM))
		stale = !ok || old < hwm
		return nil
	})
	if err != nil || !stale {
		return err
	}
	return db.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyHWM, record.EncodeInt64(hwm))
	})
}
