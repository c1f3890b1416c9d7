package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

// The report's command, run by a shell, must give compare the arguments it
// was given: it joined them with spaces, so an empty -out value vanished
// (and the line, run again, wrote results/, the published figures) and an
// argument holding a space or a quote was split or garbled.
func TestReportCommandReproducesTheArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no arguments", nil},
		{"plain", []string{"-runs", "3", "-out", "results"}},
		{"empty -out", []string{"-quick", "-out", "", "-nobig"}},
		{"empty -out last", []string{"-out", ""}},
		{"space, quote, dollar, backslash, glob", []string{"-out", "/tmp/my dir/it's $HOME \\x *", "-render", `a"b`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &suite{o: options{args: tc.args}}
			header := s.makeHeader()
			const pre = "- Command (from `bench/`): `"
			_, rest, ok := strings.Cut(header, pre)
			if !ok {
				t.Fatalf("no command line in the header:\n%s", header)
			}
			line, _, _ := strings.Cut(rest, "\n")
			line, ok = strings.CutSuffix(line, "`")
			if !ok {
				t.Fatalf("the command line does not end with a backquote: %q", line)
			}
			want := append([]string{"go", "run", "./cmd/compare"}, tc.args...)
			if got := cmdtest.ShellWords(t, line); !slices.Equal(got, want) {
				t.Errorf("the shell reads the command %s as %q, want %q", line, got, want)
			}
		})
	}
}
