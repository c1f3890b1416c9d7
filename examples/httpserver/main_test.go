//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratedb/ratedb/internal/exampletest"
)

// The example as a real process: two requests, SIGTERM, a restart on the
// same file, and the third request is denied: the graceful shutdown kept the
// counts (the README's earlier example, which never closed the DB, let 4
// requests through a limit of 2 across such a restart).
func TestCountsSurviveSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example")
	}
	bin := exampletest.Build(t)
	db := filepath.Join(t.TempDir(), "limits.db")
	// A day-long window, so that no window boundary falls between the runs
	// (the test checks the day did not change).
	args := []string{"-addr", "127.0.0.1:0", "-db", db, "-window", "24h"}
	day := time.Now().UTC().YearDay()

	get := func(s *exampletest.Server, path string) int {
		t.Helper()
		resp, err := http.Get("http://" + s.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	s := exampletest.Start(t, bin, args...)
	for i := 1; i <= 2; i++ {
		if code := get(s, "/hello"); code != http.StatusOK {
			t.Fatalf("request %d: %d, want 200", i, code)
		}
	}
	out, err := s.Stop(t)
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v (output %q)", err, out)
	}
	if out != "stopped\n" {
		t.Fatalf("output after SIGTERM: %q", out)
	}

	s = exampletest.Start(t, bin, args...)
	code := get(s, "/hello")
	if time.Now().UTC().YearDay() != day {
		t.Skip("the day changed during the test: the window ended")
	}
	if code != http.StatusTooManyRequests {
		t.Fatalf("third request after a restart: %d, want 429: the count did not survive SIGTERM", code)
	}
	if code := get(s, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	if _, err := s.Stop(t); err != nil {
		t.Fatal(err)
	}
}
