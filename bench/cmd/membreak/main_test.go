package main

import (
	"os"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

func TestMain(m *testing.M) {
	cmdtest.Main(main)
	os.Exit(m.Run())
}

// membreak runs the command in a process of its own with args and returns
// its stdout, stderr and exit status.
func membreak(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return cmdtest.Run(t, cmdtest.Cmd{}, args...)
}

// TestBadFlagsExitBeforeMeasuring: each bad flag value exits 2 with a
// message naming it, before anything is measured; -keys -1 used to panic
// making the key slice, and -maxhot 0 panicked when ristretto refused a
// cache of zero counters, after ratedb had been measured. The same run
// with good values, small, exits 0 with the three measurements.
func TestBadFlagsExitBeforeMeasuring(t *testing.T) {
	out, stderr, code := membreak(t, "-keys", "1000", "-maxhot", "1000")
	if code != 0 {
		t.Fatalf("good flags: exit status %d, want 0; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"ratedb (memory only, MaxHotKeys 1000, 1000 windows", "ristretto alone", "map[uint64]*T grown to 1000 entries"} {
		if !strings.Contains(out, want) {
			t.Errorf("good flags: stdout lacks %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"negative keys", []string{"-keys", "-1"}, "-keys must be at least 1"},
		{"no keys", []string{"-keys", "0"}, "-keys must be at least 1"},
		{"no maxhot", []string{"-maxhot", "0"}, "-maxhot must be at least 1"},
		{"negative maxhot", []string{"-maxhot", "-5"}, "-maxhot must be at least 1"},
		{"argument", []string{"-keys", "10", "20"}, `unexpected argument "20"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := membreak(t, append([]string{"-keys", "100"}, tc.args...)...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if !strings.Contains(stderr, "membreak: "+tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
			if strings.Contains(stderr, "panic") || out != "" {
				t.Errorf("something was measured or it panicked; stdout:\n%s\nstderr:\n%s", out, stderr)
			}
		})
	}
}
