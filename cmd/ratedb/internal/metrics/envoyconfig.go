package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// EnvoyConfigLoads records the loads of the Envoy config (--envoy-config):
// ratedb_envoy_config_reloads_total{result}, counting the reloads (SIGHUP,
// or a change polling saw) by result, success or error;
// ratedb_envoy_config_last_reload_successful, 1 if the last load or reload
// succeeded and 0 if it failed (the previous config stays in use); and
// ratedb_envoy_config_last_reload_success_timestamp_seconds, the Unix time
// of the last successful load, the one at start included. The names follow
// Prometheus's own prometheus_config_* metrics. Its methods are safe for
// concurrent use and do nothing on nil.
type EnvoyConfigLoads struct {
	success, failure prometheus.Counter
	ok, lastSuccess  prometheus.Gauge
}

// EnvoyConfig registers the metrics of the Envoy config's loads and
// returns them. Call it at most once, when the service has an Envoy config.
func (m *Metrics) EnvoyConfig() *EnvoyConfigLoads {
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ratedb_envoy_config_reloads_total",
		Help: "Reloads of the Envoy config (SIGHUP, or a change polling saw), by result (success or error: the previous config stays).",
	}, []string{"result"})
	l := &EnvoyConfigLoads{
		success: reloads.WithLabelValues("success"),
		failure: reloads.WithLabelValues("error"),
		ok: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ratedb_envoy_config_last_reload_successful",
			Help: "Whether the last load of the Envoy config succeeded (1) or failed and the previous config stays (0).",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ratedb_envoy_config_last_reload_success_timestamp_seconds",
			Help: "Unix time of the last successful load of the Envoy config, the one at start included.",
		}),
	}
	m.reg.MustRegister(reloads, l.ok, l.lastSuccess)
	return l
}

// Loaded records the load at start, at t (it succeeded: the service does
// not start otherwise).
func (l *EnvoyConfigLoads) Loaded(t time.Time) {
	if l == nil {
		return
	}
	l.ok.Set(1)
	l.lastSuccess.Set(unixSeconds(t))
}

// Reloaded records a reload done at t, which failed with err if err is
// not nil.
func (l *EnvoyConfigLoads) Reloaded(t time.Time, err error) {
	if l == nil {
		return
	}
	if err != nil {
		l.failure.Inc()
		l.ok.Set(0)
		return
	}
	l.success.Inc()
	l.ok.Set(1)
	l.lastSuccess.Set(unixSeconds(t))
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
