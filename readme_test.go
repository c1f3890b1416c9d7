package ratedb_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// codeLines returns the lines of Go code in src with comments, indentation
// and blank lines removed (no line of the code compared holds "//" in a
// string).
func codeLines(src string) []string {
	var out []string
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// TestReadmeQuickStartIsExample: the README's quick start is the code of
// Example, statement for statement (its error checks included), except for
// the temporary directory Example creates its file in, which the README
// names "limits.db", and the comments.
func TestReadmeQuickStartIsExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	text := string(readme)
	i := strings.Index(text, "## Quick start")
	require.GreaterOrEqual(t, i, 0, "the README's quick start")
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(text[i:])
	require.NotNil(t, block, "the quick start's code")

	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	body := regexp.MustCompile(`(?s)\nfunc Example\(\) \{\n(.*?)\n\t// Output:`).FindStringSubmatch(string(src))
	require.NotNil(t, body, "func Example")
	const start = "\tpath := filepath.Join(dir, \"limits.db\")\n"
	j := strings.Index(body[1], start)
	require.GreaterOrEqual(t, j, 0, "Example's file path")
	example := strings.ReplaceAll(body[1][j+len(start):], "ratedb.Open(path,", `ratedb.Open("limits.db",`)

	assert.Equal(t, codeLines(example), codeLines(block[1]))
}
