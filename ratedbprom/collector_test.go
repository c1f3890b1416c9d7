package ratedbprom_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/ratedbprom"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCollector(t *testing.T) {
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "p.db"), &ratedb.Options{MaxHotKeys: 1000, SnapshotPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	ctx := context.Background()
	for range 3 {
		_, err := w.Hit(ctx, "k", 2, 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Snapshot())

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(ratedbprom.NewCollector(db)))
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ratedb_hits_allowed_total Hits the DB allowed (every limiter of the DB).
# TYPE ratedb_hits_allowed_total counter
ratedb_hits_allowed_total 2
# HELP ratedb_hits_denied_total Hits the DB denied (every limiter of the DB).
# TYPE ratedb_hits_denied_total counter
ratedb_hits_denied_total 1
# HELP ratedb_windows_on_disk Window records in the state file as of the last commit.
# TYPE ratedb_windows_on_disk gauge
ratedb_windows_on_disk 1
# HELP ratedb_snapshots_total Snapshots that committed changes to the state file.
# TYPE ratedb_snapshots_total counter
ratedb_snapshots_total 1
# HELP ratedb_snapshot_backlog Window changes not yet written to the state file (bounded by Options.MaxSnapshotBacklog).
# TYPE ratedb_snapshot_backlog gauge
ratedb_snapshot_backlog 0
`), "ratedb_hits_allowed_total", "ratedb_hits_denied_total", "ratedb_windows_on_disk", "ratedb_snapshots_total", "ratedb_snapshot_backlog"))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 18, n)
}

func ExampleNewCollector() {
	db, err := ratedb.Open("", nil)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(ratedbprom.NewCollector(db))
	n, _ := testutil.GatherAndCount(reg, "ratedb_windows_in_memory")
	fmt.Println(n)
	// Output: 1
}

// Collectors of two DBs share one registry when constant labels tell them
// apart; each reports its own DB.
func TestCollectorsOfTwoDBs(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	for name, hits := range map[string]int{"sessions": 2, "logins": 5} {
		db, err := ratedb.Open("", nil)
		require.NoError(t, err)
		defer db.Close()
		w, err := db.Window(ratedb.FixedWindow, time.Minute)
		require.NoError(t, err)
		for range hits {
			_, err := w.Hit(context.Background(), "k", 100, 1)
			require.NoError(t, err)
		}
		require.NoError(t, reg.Register(ratedbprom.NewCollectorWithLabels(db, prometheus.Labels{"db": name})))
	}
	require.Error(t, reg.Register(ratedbprom.NewCollector(nil)), "an unlabelled third collides with neither, but is inconsistent")
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ratedb_hits_allowed_total Hits the DB allowed (every limiter of the DB).
# TYPE ratedb_hits_allowed_total counter
ratedb_hits_allowed_total{db="logins"} 5
ratedb_hits_allowed_total{db="sessions"} 2
`), "ratedb_hits_allowed_total"))
}

func ExampleNewCollectorWithLabels() {
	sessions, err := ratedb.Open("", nil)
	if err != nil {
		panic(err)
	}
	defer sessions.Close()
	logins, err := ratedb.Open("", nil)
	if err != nil {
		panic(err)
	}
	defer logins.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(ratedbprom.NewCollectorWithLabels(sessions, prometheus.Labels{"db": "sessions"}))
	reg.MustRegister(ratedbprom.NewCollectorWithLabels(logins, prometheus.Labels{"db": "logins"}))
	n, _ := testutil.GatherAndCount(reg, "ratedb_windows_in_memory")
	fmt.Println(n)
	// Output: 2
}
