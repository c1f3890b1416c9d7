// Package metrics is the service's Prometheus registry: the decision core's
// per-rule metrics (the rule name is the only label: never a client_id or a
// route), the DB-level collector of ratedbprom, memory in use, the loads of
// the Envoy config, and the Go and process collectors.
package metrics

import (
	"fmt"
	"net/http"
	"runtime/metrics"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
)

// Metrics records decisions (it is the core's Observer) and serves
// /metrics. It is safe for concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	checks   *prometheus.CounterVec
	resets   *prometheus.CounterVec
	spikes   *prometheus.CounterVec
	storeErr *prometheus.CounterVec
	duration prometheus.Histogram

	byRule sync.Map // rule name -> *ruleCounters
}

type ruleCounters struct {
	allow, deny, reset, spike, storeErr prometheus.Counter
}

// New returns the service's metrics; extra collectors (such as
// ratedbprom.NewCollector(db)) are registered with them.
func New(extra ...prometheus.Collector) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratedb_checks_total",
			Help: "Checks decided, by rule and decision (allow or deny), one per check.",
		}, []string{"rule", "decision"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratedb_window_resets_total",
			Help: "Counted checks that opened a new window for their key (the key's count after the check equals its cost).",
		}, []string{"rule"}),
		spikes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratedb_boundary_spikes_total",
			Help: "Keys that exhausted a window within 10% of its scale after it began, having exhausted the window before it.",
		}, []string{"rule"}),
		storeErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratedb_store_errors_total",
			Help: "Check requests that failed because the store failed (answered 503, or allowed with --fail-open).",
		}, []string{"rule"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ratedb_check_duration_seconds",
			Help:    "Time the decision core took to decide one check request.",
			Buckets: []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5},
		}),
	}
	m.reg.MustRegister(m.checks, m.resets, m.spikes, m.storeErr, m.duration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		memoryCollector())
	for _, c := range extra {
		m.reg.MustRegister(c)
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry returns the registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func (m *Metrics) rule(name string) *ruleCounters {
	if rc, ok := m.byRule.Load(name); ok {
		return rc.(*ruleCounters)
	}
	l := labelValue(name)
	rc := &ruleCounters{
		allow:    m.checks.WithLabelValues(l, "allow"),
		deny:     m.checks.WithLabelValues(l, "deny"),
		reset:    m.resets.WithLabelValues(l),
		spike:    m.spikes.WithLabelValues(l),
		storeErr: m.storeErr.WithLabelValues(l),
	}
	got, _ := m.byRule.LoadOrStore(name, rc)
	return got.(*ruleCounters)
}

// labelValue is the rule label of the rule name: name itself, with each
// byte that is not UTF-8 written as \xNN (two lower-case hex digits). A
// label value must be UTF-8 (WithLabelValues panics on one that is not),
// and an Envoy config entry's path can hold any bytes (a key, value or
// domain given as !!binary, matched by a descriptor holding those bytes).
func labelValue(name string) string {
	if utf8.ValidString(name) {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, `\x%02x`, name[i])
		} else {
			b.WriteString(name[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Checked implements core.Observer.
func (m *Metrics) Checked(rule string, allowed bool) {
	if allowed {
		m.rule(rule).allow.Inc()
	} else {
		m.rule(rule).deny.Inc()
	}
}

// WindowOpened implements core.Observer.
func (m *Metrics) WindowOpened(rule string) { m.rule(rule).reset.Inc() }

// BoundarySpike implements core.Observer.
func (m *Metrics) BoundarySpike(rule string) { m.rule(rule).spike.Inc() }

// StoreError implements core.Observer.
func (m *Metrics) StoreError(rule string) { m.rule(rule).storeErr.Inc() }

// Decided implements core.Observer.
func (m *Metrics) Decided(d time.Duration) { m.duration.Observe(d.Seconds()) }

var _ core.Observer = (*Metrics)(nil)

// memoryCollector reports ratedb_memory_in_use_bytes: memory the Go runtime
// has mapped and not returned to the OS (runtime/metrics
// /memory/classes/total:bytes minus /memory/classes/heap/released:bytes).
func memoryCollector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ratedb_memory_in_use_bytes",
		Help: "Memory the Go runtime holds from the OS (total minus released heap).",
	}, func() float64 {
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return float64(s[0].Value.Uint64() - s[1].Value.Uint64())
	})
}
