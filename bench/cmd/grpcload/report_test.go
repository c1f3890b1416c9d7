package main

import (
	"testing"
	"time"

	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

// The report's command, run by a shell, must give the command the
// arguments it was given: an empty -out value (stdout only) was dropped,
// and the command shown then wrote results/GRPC.md, the published table; an
// argument holding a space or a quote was split or garbled.
func TestReportCommandReproducesTheArguments(t *testing.T) {
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
			cmdtest.CheckCommand(t, report, "- Command (from `bench/`): `", "`", append([]string{"go", "run", "./cmd/grpcload"}, tc.args...))
		})
	}
}
