package main

import (
	"testing"
)

// A failed measurement is no figure. Its round counted as 0 ns/hit: in its
// own row's median and range (marked failed), and, when GoLimiter's
// measurement failed, as a ratio of 0 in every other row of that round,
// rows that did not say anything had failed.
func TestFailedRoundsAreNoFigures(t *testing.T) {
	gl := &row{pattern: "zipf", limiter: "GoLimiter", ns: []float64{100, 0, 600}, failed: true}
	for _, tc := range []struct {
		name string
		x    *row
		want string
	}{
		{"a clean row, GoLimiter failed in round 2",
			&row{pattern: "zipf", limiter: "MutexMap", ns: []float64{50, 100, 200}},
			"| zipf | MutexMap | 100 (50–200) | 2.50x | 0 (0s) | 0 |\n"},
		{"a row that failed in round 1",
			&row{pattern: "zipf", limiter: "RatedbFile", ns: []float64{0, 200, 300}, failed: true, snapshots: 7, last: 1500e6, peak: 9},
			"| zipf | RatedbFile | 250 (200–300) (failed: see log) | 2.00x | 7 (1.5s) | 9 |\n"},
		{"GoLimiter's own row",
			gl,
			"| zipf | GoLimiter | 350 (100–600) (failed: see log) | 1.00x | 0 (0s) | 0 |\n"},
		{"every round failed",
			&row{pattern: "zipf", limiter: "RatedbMem", ns: []float64{0, 0, 0}, failed: true},
			"| zipf | RatedbMem | - (failed: see log) | - | 0 (0s) | 0 |\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.x.line(gl); got != tc.want {
				t.Errorf("got  %s want %s", got, tc.want)
			}
		})
	}
	if got, want := (&row{pattern: "roundrobin", limiter: "MutexMap", ns: []float64{80}}).line(nil), "| roundrobin | MutexMap | 80 (80–80) | - | 0 (0s) | 0 |\n"; got != want {
		t.Errorf("without GoLimiter: got %s want %s", got, want)
	}
}
