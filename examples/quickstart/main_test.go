package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/internal/exampletest"
)

const again = "run me again: the count continues"

// The demo as a real process, three runs on one file: the count continues
// across runs, and the run whose requests are all denied does not invite the
// user to run it again (it used to).
func TestQuickstartRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example")
	}
	bin := exampletest.Build(t)
	db := filepath.Join(t.TempDir(), "quickstart.db")
	want := []struct {
		used, allowed, denied int
		again                 bool
	}{
		{0, 3, 0, true},
		{3, 2, 1, true},
		{5, 0, 3, false},
	}
	for i, w := range want {
		out := exampletest.Run(t, bin, "-db", db)
		if got := strings.Count(out, ": allowed,"); got != w.allowed {
			t.Errorf("run %d: %d allowed, want %d\n%s", i+1, got, w.allowed, out)
		}
		if got := strings.Count(out, ": denied,"); got != w.denied {
			t.Errorf("run %d: %d denied, want %d\n%s", i+1, got, w.denied, out)
		}
		if !strings.Contains(out, fmt.Sprintf("has used %d of 5", w.used)) {
			t.Errorf("run %d: want %d used before\n%s", i+1, w.used, out)
		}
		if strings.Contains(out, again) != w.again {
			t.Errorf("run %d: says %q: %v, want %v\n%s", i+1, again, !w.again, w.again, out)
		}
	}
}
