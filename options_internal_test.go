package ratedb

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOptionsDefaults pins the defaults Options' field docs state to what
// Open applies, for nil Options and for the zero Options (whose every field
// selects its default): CleanPeriod 1 minute, SnapshotPeriod 1 second,
// MaxHotKeys 1<<20, MaxSnapshotBacklog 1<<18, OpenTimeout 1 second, Logger
// slog.Default(), OnCorrupt CorruptFail, the default clock, KeyOlderThan 0
// and NoSync false; and that the negative periods that disable background
// work are kept, not replaced by a default.
func TestOptionsDefaults(t *testing.T) {
	for name, opts := range map[string]*Options{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "d.db"), opts)
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			o := db.opts
			assert.Equal(t, time.Minute, o.CleanPeriod, "CleanPeriod")
			assert.Equal(t, time.Second, o.SnapshotPeriod, "SnapshotPeriod")
			assert.Equal(t, int64(1<<20), o.MaxHotKeys, "MaxHotKeys")
			assert.Equal(t, int64(1<<18), o.MaxSnapshotBacklog, "MaxSnapshotBacklog")
			assert.Equal(t, int64(1<<20+1<<18), db.memLimit, "MaxHotKeys + MaxSnapshotBacklog")
			assert.Equal(t, time.Second, o.OpenTimeout, "OpenTimeout")
			assert.Same(t, slog.Default(), db.log, "Logger")
			assert.Equal(t, CorruptFail, o.OnCorrupt, "OnCorrupt")
			assert.Nil(t, db.clock, "Clock: the default (coarse) clock")
			assert.Zero(t, db.kot, "KeyOlderThan")
			assert.False(t, o.NoSync, "NoSync")
			// The Default constants are what the docs say, and what Open used.
			assert.Equal(t, DefaultCleanPeriod, o.CleanPeriod)
			assert.Equal(t, DefaultSnapshotPeriod, o.SnapshotPeriod)
			assert.Equal(t, int64(DefaultMaxHotKeys), o.MaxHotKeys)
			assert.Equal(t, int64(DefaultMaxSnapshotBacklog), o.MaxSnapshotBacklog)
			assert.Equal(t, DefaultOpenTimeout, o.OpenTimeout)
		})
	}
	t.Run("negative periods", func(t *testing.T) {
		db, err := Open(filepath.Join(t.TempDir(), "d.db"), &Options{CleanPeriod: -1, SnapshotPeriod: -1})
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		assert.Negative(t, db.opts.CleanPeriod, "CleanPeriod: negative disables the janitor")
		assert.Negative(t, db.opts.SnapshotPeriod, "SnapshotPeriod: negative disables periodic snapshots")
	})
}
