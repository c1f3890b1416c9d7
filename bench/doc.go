// Package bench measures ratedb against the Go rate limiters people use, in
// one run on one machine.
//
// Every limiter is wrapped in a [Limiter] built by a [Factory] from the same
// [Config], so each one counts the same kind of hit against a comparable
// quota. The workloads are plain functions taking a *testing.B, shared by the
// `go test -bench` benchmarks in this module and by the cmd/compare program
// that runs the whole suite and writes results/RESULTS.md and
// results/chart.svg.
//
// This package is its own module, so that the peers never enter ratedb's
// go.sum.
package bench
