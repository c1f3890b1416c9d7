package main

import (
	"bytes"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

func TestMain(m *testing.M) {
	cmdtest.Main(main)
	os.Exit(m.Run())
}

// TestInterruptRemovesTheDatabase floods a billion keys (hours of work, a
// file of tens of GB) in a process of its own, with -cpuprofile, and sends
// it SIGINT once it has hit its first million: it must stop, exit 130 with
// "interrupted" on stderr, remove the temporary directory with the
// database file and stop the CPU profile (its gzip data written). Before,
// the signal ended the process at once: the directory and its file stayed
// in TMPDIR and the profile was empty.
func TestInterruptRemovesTheDatabase(t *testing.T) {
	tmp := t.TempDir()
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	p := cmdtest.Start(t, cmdtest.Cmd{TempDir: tmp}, "-keys", "1000000000", "-maxhot", "100000", "-cpuprofile", prof)
	p.WaitStderr(t, "flood: 1000000 keys in", 2*time.Minute)
	if ents, _ := os.ReadDir(tmp); len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "ratedb-flood-") {
		t.Fatalf("TMPDIR holds %v, want the flood's directory", ents)
	}
	p.Signal(t, syscall.SIGINT)
	_, stderr, code := p.Wait(t, time.Minute)
	if code != 130 {
		t.Errorf("exit status %d, want 130; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "flood: interrupted by SIGINT") {
		t.Errorf("stderr does not say it was interrupted:\n%s", stderr)
	}
	cmdtest.RequireEmpty(t, tmp)
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("the CPU profile holds %d bytes and no gzip header: it was not stopped", len(b))
	}
}

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

// TestBadFlagsExitBeforeFlooding: each bad flag value makes run return 2
// with a message naming it, before the CPU profile is started or anything
// else made. -keys 0 used to flood nothing and return 0 (0 hits/s, a
// result with nothing in it), -keys -1 to fail only after opening a
// database, and a stray argument was ignored.
func TestBadFlagsExitBeforeFlooding(t *testing.T) {
	var logged bytes.Buffer
	log.SetOutput(&logged)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no keys", []string{"-keys", "0"}, "flood: -keys must be at least 1"},
		{"negative keys", []string{"-keys", "-1"}, "flood: -keys must be at least 1"},
		{"negative goroutines", []string{"-keys", "10", "-goroutines", "-1"}, "flood: -goroutines must not be negative"},
		{"argument", []string{"-keys", "10", "20"}, `flood: unexpected argument "20"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged.Reset()
			prof := filepath.Join(t.TempDir(), "cpu.pprof")
			if code := run(append([]string{"-dir", t.TempDir(), "-cpuprofile", prof}, tc.args...)); code != 2 {
				t.Errorf("run returned %d, want 2", code)
			}
			if !strings.Contains(logged.String(), tc.want) {
				t.Errorf("the log lacks %q:\n%s", tc.want, logged.String())
			}
			if _, err := os.Stat(prof); !os.IsNotExist(err) {
				t.Errorf("the CPU profile was started (stat: %v): the flags were checked too late", err)
			}
		})
	}
}
