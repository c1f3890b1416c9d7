package main

import (
	"testing"

	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

// The report's command, run by a shell, must give redisbench the arguments
// it was given: it joined them with spaces, so an empty value vanished and
// an -out path holding a space or a quote was split or garbled.
func TestReportCommandReproducesTheArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no arguments", nil},
		{"plain", []string{"-duration", "5s", "-out", "results/REDIS.md"}},
		{"empty -out", []string{"-out", "", "-quick"}},
		{"empty -out last", []string{"-out", ""}},
		{"space, quote, dollar, backslash, glob", []string{"-out", "/tmp/my dir/it's $HOME \\x *.md"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmdtest.CheckCommand(t, header(tc.args, "7.0.15"), "Command: `cd bench && ", "`  ", append([]string{"go", "run", "./cmd/redisbench"}, tc.args...))
		})
	}
}
