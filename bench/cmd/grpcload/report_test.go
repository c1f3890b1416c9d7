package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The report's command, run by a shell, must give the command the
// arguments it was given: an empty -out value (stdout only) was dropped,
// and the command shown then wrote results/GRPC.md, the published table; an
// argument holding a space or a quote was split or garbled.
func TestReportCommandReproducesTheArguments(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run the command with")
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no arguments", nil},
		{"empty -out", []string{"-targets", "noop", "-out", "", "-rounds", "1"}},
		{"empty -out last", []string{"-out", ""}},
		{"space, quote, dollar, backslash", []string{"-ratedb", "/tmp/my dir/it's $HOME \\ratedb", "-out", "a'b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report := format(options{args: tc.args}, nil, time.Now(), "0 0 0", "0 0 0")
			const pre = "- Command (from `bench/`): `"
			i := strings.Index(report, pre)
			if i < 0 {
				t.Fatalf("no command line in the report:\n%s", report)
			}
			line, _, _ := strings.Cut(report[i+len(pre):], "\n")
			line, ok := strings.CutSuffix(line, "`")
			if !ok {
				t.Fatalf("the command line does not end with a backquote: %q", line)
			}
			// The shell prints each word of the line on a line of its
			// own, between brackets.
			out, err := exec.Command(sh, "-c", "set -- "+line+`; for a in "$@"; do printf '[%s]\n' "$a"; done`).CombinedOutput()
			if err != nil {
				t.Fatalf("sh: %v: %s\n%s", err, out, line)
			}
			want := "[go]\n[run]\n[./cmd/grpcload]\n"
			for _, a := range tc.args {
				want += "[" + a + "]\n"
			}
			if string(out) != want {
				t.Errorf("the shell reads the command %q as\n%s\nwant\n%s", line, out, want)
			}
		})
	}
}
