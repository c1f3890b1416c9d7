// Package ratedbprom exports a ratedb.DB's Stats as Prometheus metrics, so
// that a program embedding ratedb gets the same DB-level metrics as the
// ratedb service with one line:
//
//	prometheus.MustRegister(ratedbprom.NewCollector(db))
//
// The collector reads DB.Stats at each scrape; it adds no work to hits.
// Every numeric field of Stats is a metric (LastSnapshotDuration in
// seconds); LastSnapshotError, an error, is not: ratedb_snapshot_failures_total
// counts the failures.
package ratedbprom

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/ratedb/ratedb"
)

// Collector is a prometheus.Collector for one DB. It is safe for concurrent
// use, also after the DB is closed (it then reports the final counters).
type Collector struct {
	db    *ratedb.DB
	descs []*prometheus.Desc
}

type metric struct {
	name, help string
	kind       prometheus.ValueType
	value      func(s *ratedb.Stats) float64
}

// metrics are the collector's metrics, in the order they are described.
var metrics = []metric{
	{"ratedb_windows_in_memory", "Windows held in memory (hot in the cache, or cold and waiting to be written).", prometheus.GaugeValue,
		func(s *ratedb.Stats) float64 { return float64(s.WindowsInMemory) }},
	{"ratedb_windows_on_disk", "Window records in the state file as of the last commit.", prometheus.GaugeValue,
		func(s *ratedb.Stats) float64 { return float64(s.WindowsOnDisk) }},
	{"ratedb_hits_allowed_total", "Hits the DB allowed (every limiter of the DB).", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.Allowed) }},
	{"ratedb_hits_denied_total", "Hits the DB denied (every limiter of the DB).", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.Denied) }},
	{"ratedb_snapshots_total", "Snapshots that committed changes to the state file.", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.Snapshots) }},
	{"ratedb_snapshot_failures_total", "Snapshots whose write failed (their windows are retried by the next one).", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.SnapshotFailures) }},
	{"ratedb_snapshot_duration_seconds", "Duration of the last completed snapshot.", prometheus.GaugeValue,
		func(s *ratedb.Stats) float64 { return s.LastSnapshotDuration.Seconds() }},
	{"ratedb_snapshot_windows", "Window records the last completed snapshot wrote or deleted.", prometheus.GaugeValue,
		func(s *ratedb.Stats) float64 { return float64(s.LastSnapshotWindows) }},
	{"ratedb_snapshot_bytes", "Bytes of blocks (keys and values) the last completed snapshot wrote to the state file.", prometheus.GaugeValue,
		func(s *ratedb.Stats) float64 { return float64(s.LastSnapshotBytes) }},
	{"ratedb_snapshot_backlog", "Window changes not yet written to the state file, hot windows' included (it can exceed Options.MaxSnapshotBacklog, which bounds the windows in memory beyond MaxHotKeys).", prometheus.GaugeValue,
		func(s *ratedb.Stats) float64 { return float64(s.SnapshotBacklog) }},
	{"ratedb_backlog_waits_total", "Calls that waited for a snapshot because memory held MaxHotKeys + MaxSnapshotBacklog windows.", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.BacklogWaits) }},
	{"ratedb_spills_total", "Windows the hot cache evicted or declined (kept cold or written to the file).", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.Spilled) }},
	{"ratedb_reloads_total", "Windows read back from the state file on use.", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.Reloaded) }},
	{"ratedb_cleaned_total", "Expired windows the janitor removed.", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.Cleaned) }},
	{"ratedb_janitor_failures_total", "Janitor passes that failed to clean the state file.", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.JanitorFailures) }},
	{"ratedb_file_reads_avoided_total", "Look-ups of windows the presence filter showed absent from the state file, answered without reading it.", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.FileReadsAvoided) }},
	{"ratedb_presence_filter_bytes", "Size of the presence filter of the state file's windows.", prometheus.GaugeValue,
		func(s *ratedb.Stats) float64 { return float64(s.PresenceFilterBytes) }},
	{"ratedb_cache_reports_dropped_total", "Uses (sampled uses of hot windows, uses of cold windows not offered to the cache) dropped before the cache's frequency sketch because its reporter fell behind.", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.CacheReportsDropped) }},
	{"ratedb_corrupt_skipped_total", "Damaged records or pages skipped (see ratedb.Stats.CorruptSkipped).", prometheus.CounterValue,
		func(s *ratedb.Stats) float64 { return float64(s.CorruptSkipped) }},
}

// NewCollector returns a collector of db's Stats. Register it once per DB.
// To register collectors of several DBs in one registry, give each
// constant labels that tell them apart (NewCollectorWithLabels).
func NewCollector(db *ratedb.DB) *Collector {
	return NewCollectorWithLabels(db, nil)
}

// NewCollectorWithLabels is NewCollector with constant labels on every
// metric, for example prometheus.Labels{"db": "sessions"}: collectors of
// several DBs can then share a registry (without them, the second
// registration fails as a duplicate).
func NewCollectorWithLabels(db *ratedb.DB, labels prometheus.Labels) *Collector {
	c := &Collector{db: db}
	for _, m := range metrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, nil, labels))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.db.Stats()
	for i, m := range metrics {
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&s))
	}
}

var _ prometheus.Collector = (*Collector)(nil)
