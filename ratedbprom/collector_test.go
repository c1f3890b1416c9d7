package ratedbprom_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
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
# HELP ratedb_snapshot_backlog Window changes not yet written to the state file, hot windows' included (it can exceed Options.MaxSnapshotBacklog, which bounds the windows in memory beyond MaxHotKeys).
# TYPE ratedb_snapshot_backlog gauge
ratedb_snapshot_backlog 0
`), "ratedb_hits_allowed_total", "ratedb_hits_denied_total", "ratedb_windows_on_disk", "ratedb_snapshots_total", "ratedb_snapshot_backlog"))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 19, n)
}

// Every numeric field of Stats is exported, with its value (a field added
// to Stats fails this test until it is exported or listed here).
func TestCollectorExportsEveryStat(t *testing.T) {
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "p.db"), &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	defer db.Close()
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	for i := range 5 {
		_, err := w.Hit(context.Background(), fmt.Sprint("k", i%3), 1, 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Snapshot())
	metricOf := map[string]string{
		"WindowsInMemory":      "ratedb_windows_in_memory",
		"WindowsOnDisk":        "ratedb_windows_on_disk",
		"Allowed":              "ratedb_hits_allowed_total",
		"Denied":               "ratedb_hits_denied_total",
		"Snapshots":            "ratedb_snapshots_total",
		"SnapshotFailures":     "ratedb_snapshot_failures_total",
		"LastSnapshotDuration": "ratedb_snapshot_duration_seconds",
		"LastSnapshotWindows":  "ratedb_snapshot_windows",
		"LastSnapshotBytes":    "ratedb_snapshot_bytes",
		"LastSnapshotError":    "", // an error: the failures counter counts them
		"Spilled":              "ratedb_spills_total",
		"Reloaded":             "ratedb_reloads_total",
		"Cleaned":              "ratedb_cleaned_total",
		"CorruptSkipped":       "ratedb_corrupt_skipped_total",
		"JanitorFailures":      "ratedb_janitor_failures_total",
		"SnapshotBacklog":      "ratedb_snapshot_backlog",
		"BacklogWaits":         "ratedb_backlog_waits_total",
		"FileReadsAvoided":     "ratedb_file_reads_avoided_total",
		"PresenceFilterBytes":  "ratedb_presence_filter_bytes",
		"CacheReportsDropped":  "ratedb_cache_reports_dropped_total",
	}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(ratedbprom.NewCollector(db)))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range families {
		require.Len(t, mf.GetMetric(), 1, mf.GetName())
		m := mf.GetMetric()[0]
		got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	st := db.Stats()
	require.Positive(t, st.LastSnapshotBytes, "the snapshot wrote blocks")
	sv := reflect.ValueOf(st)
	for i := range sv.NumField() {
		field := sv.Type().Field(i).Name
		name, ok := metricOf[field]
		if !assert.Truef(t, ok, "Stats.%s is not exported", field) || name == "" {
			continue
		}
		want := float64(sv.Field(i).Int())
		if field == "LastSnapshotDuration" {
			want = st.LastSnapshotDuration.Seconds()
		}
		if assert.Containsf(t, got, name, "Stats.%s", field) {
			assert.Equalf(t, want, got[name], "%s (Stats.%s)", name, field)
		}
		delete(got, name)
	}
	assert.Empty(t, got, "metrics of no Stats field")
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

// The Collector's doc: it is safe to use after the DB is closed, and then
// reports the final counters.
func TestCollectorAfterClose(t *testing.T) {
	db, err := ratedb.Open(filepath.Join(t.TempDir(), "p.db"), &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	for range 3 {
		_, err := w.Hit(context.Background(), "k", 2, 1)
		require.NoError(t, err)
	}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(ratedbprom.NewCollector(db)))
	require.NoError(t, db.Close())

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ratedb_hits_allowed_total Hits the DB allowed (every limiter of the DB).
# TYPE ratedb_hits_allowed_total counter
ratedb_hits_allowed_total 2
# HELP ratedb_hits_denied_total Hits the DB denied (every limiter of the DB).
# TYPE ratedb_hits_denied_total counter
ratedb_hits_denied_total 1
# HELP ratedb_snapshots_total Snapshots that committed changes to the state file.
# TYPE ratedb_snapshots_total counter
ratedb_snapshots_total 1
`), "ratedb_hits_allowed_total", "ratedb_hits_denied_total", "ratedb_snapshots_total"), "the final snapshot of Close is counted")
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 19, n)
}
