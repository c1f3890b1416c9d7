package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRunStopsProfileWhenTempDirFails makes os.MkdirTemp fail (TMPDIR names
// a directory that does not exist) in a run with -cpuprofile: run must
// return 1, not exit the process, and the CPU profile must have been
// stopped, which is when its (gzip-compressed) data is written.
func TestRunStopsProfileWhenTempDirFails(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	if code := run([]string{"-keys", "10", "-cpuprofile", prof}); code != 1 {
		t.Fatalf("run returned %d, want 1", code)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("the CPU profile holds %d bytes and no gzip header: it was not stopped", len(b))
	}
}

// TestRunSmall floods 1,000 keys with a hot set of 100 in a given
// directory: run parses its arguments and returns 0, every count exact.
func TestRunSmall(t *testing.T) {
	if code := run([]string{"-keys", "1000", "-maxhot", "100", "-dir", t.TempDir()}); code != 0 {
		t.Fatalf("run returned %d, want 0", code)
	}
}
