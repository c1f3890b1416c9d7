// Package metrics is the service's Prometheus registry: the decision core's
// per-rule metrics (labelled with the API the rule belongs to, http or
// envoy, and the rule's name: never a client_id, a route or a descriptor's
// value), the DB-level collector of ratedbprom, memory in use, the loads of
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

	byRule sync.Map // ruleID -> *ruleCounters
}

// ruleID names a rule: its API (core.Limit.API) and its name. An HTTP rule
// and an Envoy config entry can have the same name.
type ruleID struct{ api, name string }

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
			Help: "Checks decided, by API (http or envoy), rule and decision (allow or deny), one per check.",
		}, []string{"api", "rule", "decision"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratedb_window_resets_total",
			Help: "Counted checks that opened a new window for their key (the key's count after the check equals its cost), by API and rule.",
		}, []string{"api", "rule"}),
		spikes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratedb_boundary_spikes_total",
			Help: "Keys that exhausted a window within 10% of its scale after it began, having exhausted the window before it, by API and rule.",
		}, []string{"api", "rule"}),
		storeErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratedb_store_errors_total",
			Help: "Check requests that failed because the store failed (answered 503 over HTTP or UNAVAILABLE over gRPC, or allowed with --fail-open), by API and rule.",
		}, []string{"api", "rule"}),
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

func (m *Metrics) rule(api, name string) *ruleCounters {
	id := ruleID{api, name}
	if rc, ok := m.byRule.Load(id); ok {
		return rc.(*ruleCounters)
	}
	a, l := labelValue(api), labelValue(name)
	rc := &ruleCounters{
		allow:    m.checks.WithLabelValues(a, l, "allow"),
		deny:     m.checks.WithLabelValues(a, l, "deny"),
		reset:    m.resets.WithLabelValues(a, l),
		spike:    m.spikes.WithLabelValues(a, l),
		storeErr: m.storeErr.WithLabelValues(a, l),
	}
	got, _ := m.byRule.LoadOrStore(id, rc)
	return got.(*ruleCounters)
}

// labelValue is the label of a rule name (or API): name itself, with each
// byte that is not UTF-8 written as \xNN (two lower-case hex digits) and
// each backslash as \\. A label value must be UTF-8 (WithLabelValues panics
// on one that is not), and an Envoy config entry's path can hold any bytes
// (a key, value or domain given as !!binary, matched by a descriptor
// holding those bytes). Escaping the backslash keeps the mapping
// one-to-one: the path holding the byte 0xff and the one holding the four
// characters \xff would otherwise share a series.
func labelValue(name string) string {
	if utf8.ValidString(name) && !strings.Contains(name, `\`) {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, name[i])
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(name[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Checked implements core.Observer.
func (m *Metrics) Checked(api, rule string, allowed bool) {
	if allowed {
		m.rule(api, rule).allow.Inc()
	} else {
		m.rule(api, rule).deny.Inc()
	}
}

// WindowOpened implements core.Observer.
func (m *Metrics) WindowOpened(api, rule string) { m.rule(api, rule).reset.Inc() }

// BoundarySpike implements core.Observer.
func (m *Metrics) BoundarySpike(api, rule string) { m.rule(api, rule).spike.Inc() }

// StoreError implements core.Observer.
func (m *Metrics) StoreError(api, rule string) { m.rule(api, rule).storeErr.Inc() }

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
