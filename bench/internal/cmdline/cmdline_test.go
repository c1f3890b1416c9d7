package cmdline_test

import (
	"slices"
	"testing"

	"github.com/ratedb/ratedb/bench/internal/cmdline"
	"github.com/ratedb/ratedb/bench/internal/cmdtest"
)

// A shell must split the joined line back into the arguments, whatever
// they hold.
func TestJoinIsSplitBackByTheShell(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // the line, when it is known
	}{
		{"name only", []string{"go"}, "go"},
		{"plain", []string{"go", "run", "./cmd/x", "-keys", "1000", "-out", "results/X.md", "-d=1s,2@3%4+5:6"}, "go run ./cmd/x -keys 1000 -out results/X.md -d=1s,2@3%4+5:6"},
		{"empty", []string{"go", "-out", ""}, "go -out ''"},
		{"empty last two", []string{"go", "", ""}, "go '' ''"},
		{"space", []string{"go", "-out", "/tmp/my dir/x"}, "go -out '/tmp/my dir/x'"},
		{"single quote", []string{"go", "it's", "'", "''"}, `go 'it'\''s' ''\''' ''\'''\'''`},
		{"double quote, dollar, backquote, backslash", []string{"go", `"$HOME" $(id) ` + "`id`" + ` \n \\`}, ""},
		{"globs, tilde, comment, semicolon, ampersand, pipe", []string{"go", "*", "?", "[a]", "~", "#x", "a;b", "a&b", "a|b", "a>b", "(x)", "{a,b}", "!x"}, ""},
		{"tab and line breaks", []string{"go", "a\tb", "a\nb", "\r\n"}, ""},
		{"not UTF-8", []string{"go", "\xff\xfe"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := cmdline.Join(tc.args)
			if tc.want != "" && line != tc.want {
				t.Errorf("Join(%q) = %s, want %s", tc.args, line, tc.want)
			}
			if got := cmdtest.ShellWords(t, line); !slices.Equal(got, tc.args) {
				t.Errorf("the shell reads %s as %q, want %q", line, got, tc.args)
			}
		})
	}
}
