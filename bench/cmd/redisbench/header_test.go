package main

import (
	"slices"
	"strings"
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
			h := header(tc.args, "7.0.15")
			const pre = "Command: `cd bench && "
			_, rest, ok := strings.Cut(h, pre)
			if !ok {
				t.Fatalf("no command line in the header:\n%s", h)
			}
			line, _, _ := strings.Cut(rest, "\n")
			line, ok = strings.CutSuffix(line, "`  ")
			if !ok {
				t.Fatalf("the command line does not end with a backquote: %q", line)
			}
			want := append([]string{"go", "run", "./cmd/redisbench"}, tc.args...)
			if got := cmdtest.ShellWords(t, line); !slices.Equal(got, want) {
				t.Errorf("the shell reads the command %s as %q, want %q", line, got, want)
			}
		})
	}
}
