package main_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// flagEntries parses flag.PrintDefaults output: each entry is its
// "  -name ..." line with the indented description lines after it.
func flagEntries(text string) map[string]string {
	out := map[string]string{}
	name := ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			name = strings.Fields(line)[0][1:]
			out[name] = line
		case name != "" && strings.HasPrefix(line, "    \t"):
			out[name] += "\n" + line
		default:
			name = ""
		}
	}
	return out
}

// TestReadmeFlagsMatchHelp: the README's flag block is what `ratedb serve
// -h` prints, word for word, and every flag it prints is in the README
// (the gRPC and Envoy flags in their own table).
func TestReadmeFlagsMatchHelp(t *testing.T) {
	t.Parallel()
	_, help, _ := runTool(t, "serve", "-h")
	flags := flagEntries(help)
	require.NotEmpty(t, flags)

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	text := string(readme)
	i := strings.Index(text, "### Flags (`ratedb serve -h`")
	require.GreaterOrEqual(t, i, 0, "the README's flags section")
	block := regexp.MustCompile("(?s)```\n(.*?)```").FindStringSubmatch(text[i:])
	require.NotNil(t, block)
	documented := flagEntries(block[1])
	require.NotEmpty(t, documented)
	for name, entry := range documented {
		assert.Equal(t, flags[name], entry, "README entry of -%s differs from serve -h", name)
	}
	for name := range flags {
		if _, ok := documented[name]; !ok {
			assert.Contains(t, text, "`--"+name, "-%s is in neither the README's flag block nor a table", name)
		}
	}
}
