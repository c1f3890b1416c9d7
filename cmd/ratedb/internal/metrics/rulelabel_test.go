package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ratedbmetrics "github.com/ratedb/ratedb/cmd/ratedb/internal/metrics"
)

// A rule name that is not UTF-8 (an Envoy config entry's path can hold any
// bytes) is a label with each such byte written as \xNN: it used to reach
// WithLabelValues as it is, which panics on a label value that is not
// UTF-8, and a gRPC call that matched the entry ended the process. Names
// that differ only in such bytes stay apart.
func TestRuleNameNotUTF8IsEscaped(t *testing.T) {
	m := ratedbmetrics.New()
	require.NotPanics(t, func() {
		m.Checked("envoy", "edge.ua_curl\xff", true)
		m.Checked("envoy", "edge.ua_curl\xfe", false)
		m.Checked("envoy", "edge.ua_é", true) // UTF-8: as it is
		m.WindowOpened("envoy", "edge.ua_curl\xff")
		m.BoundarySpike("envoy", "edge.ua_curl\xff")
		m.StoreError("envoy", "edge.ua_curl\xff")
	})
	assert.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP ratedb_checks_total Checks decided, by API (http or envoy), rule and decision (allow or deny), one per check.
# TYPE ratedb_checks_total counter
ratedb_checks_total{api="envoy",decision="allow",rule="edge.ua_curl\\xfe"} 0
ratedb_checks_total{api="envoy",decision="allow",rule="edge.ua_curl\\xff"} 1
ratedb_checks_total{api="envoy",decision="allow",rule="edge.ua_é"} 1
ratedb_checks_total{api="envoy",decision="deny",rule="edge.ua_curl\\xfe"} 1
ratedb_checks_total{api="envoy",decision="deny",rule="edge.ua_curl\\xff"} 0
ratedb_checks_total{api="envoy",decision="deny",rule="edge.ua_é"} 0
# HELP ratedb_store_errors_total Check requests that failed because the store failed (answered 503 over HTTP or UNAVAILABLE over gRPC, or allowed with --fail-open), by API and rule.
# TYPE ratedb_store_errors_total counter
ratedb_store_errors_total{api="envoy",rule="edge.ua_curl\\xfe"} 0
ratedb_store_errors_total{api="envoy",rule="edge.ua_curl\\xff"} 1
ratedb_store_errors_total{api="envoy",rule="edge.ua_é"} 0
`), "ratedb_checks_total", "ratedb_store_errors_total"))
}

// The label of a rule name is one-to-one: a backslash is written \\, so a
// path holding the byte 0xff (written \xff) and one holding the four
// characters \xff (written \\xff), both possible in an Envoy config, are
// two series. Before, both were labelled \xff and their counts summed.
// (The text format below doubles each backslash of a label again.)
func TestRuleNameEscapingKeepsNamesApart(t *testing.T) {
	m := ratedbmetrics.New()
	m.Checked("envoy", "edge.ua_curl\xff", true)   // a byte that is not UTF-8
	m.Checked("envoy", `edge.ua_curl\xff`, false)  // a backslash, then "xff"
	m.Checked("envoy", `edge.ua_curl\\xff`, false) // two backslashes
	m.StoreError("envoy", "edge.ua_curl\\\xff")    // a backslash, then the byte
	m.StoreError("envoy", `edge.ua_curl\\xff`)     // two backslashes, then "xff"
	assert.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP ratedb_checks_total Checks decided, by API (http or envoy), rule and decision (allow or deny), one per check.
# TYPE ratedb_checks_total counter
ratedb_checks_total{api="envoy",decision="allow",rule="edge.ua_curl\\\\\\\\xff"} 0
ratedb_checks_total{api="envoy",decision="allow",rule="edge.ua_curl\\\\\\xff"} 0
ratedb_checks_total{api="envoy",decision="allow",rule="edge.ua_curl\\\\xff"} 0
ratedb_checks_total{api="envoy",decision="allow",rule="edge.ua_curl\\xff"} 1
ratedb_checks_total{api="envoy",decision="deny",rule="edge.ua_curl\\\\\\\\xff"} 1
ratedb_checks_total{api="envoy",decision="deny",rule="edge.ua_curl\\\\\\xff"} 0
ratedb_checks_total{api="envoy",decision="deny",rule="edge.ua_curl\\\\xff"} 1
ratedb_checks_total{api="envoy",decision="deny",rule="edge.ua_curl\\xff"} 0
# HELP ratedb_store_errors_total Check requests that failed because the store failed (answered 503 over HTTP or UNAVAILABLE over gRPC, or allowed with --fail-open), by API and rule.
# TYPE ratedb_store_errors_total counter
ratedb_store_errors_total{api="envoy",rule="edge.ua_curl\\\\\\\\xff"} 1
ratedb_store_errors_total{api="envoy",rule="edge.ua_curl\\\\\\xff"} 1
ratedb_store_errors_total{api="envoy",rule="edge.ua_curl\\\\xff"} 0
ratedb_store_errors_total{api="envoy",rule="edge.ua_curl\\xff"} 0
`), "ratedb_checks_total", "ratedb_store_errors_total"))
}
