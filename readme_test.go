package ratedb_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
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

// readmeTable returns the first cell of each row of the README table that
// follows header (its header line and separator), and each row's cells.
func readmeTable(t *testing.T, section, header string) map[string][]string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	text := string(readme)
	i := strings.Index(text, section)
	require.GreaterOrEqual(t, i, 0, "the README's section %q", section)
	j := strings.Index(text[i:], header+"\n|---")
	require.GreaterOrEqual(t, j, 0, "the table %q in %q", header, section)
	lines := strings.Split(text[i+j:], "\n")[2:]
	rows := map[string][]string{}
	cellRE := regexp.MustCompile("^`([A-Za-z0-9_]+)`$")
	for _, line := range lines {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		require.GreaterOrEqual(t, len(cells), 3, line)
		for k := range cells {
			cells[k] = strings.TrimSpace(cells[k])
		}
		m := cellRE.FindStringSubmatch(cells[1])
		require.NotNil(t, m, "a row naming one field in backquotes: %s", line)
		require.NotContains(t, rows, m[1], "listed twice")
		rows[m[1]] = cells[2:]
	}
	require.NotEmpty(t, rows)
	return rows
}

// exportedFields returns the names of v's exported struct fields.
func exportedFields(v any) []string {
	var out []string
	for f := range reflect.TypeOf(v).Fields() {
		if f.IsExported() {
			out = append(out, f.Name)
		}
	}
	return out
}

// TestReadmeOptionsMatchStruct: the README's table of Options lists every
// exported field of ratedb.Options and no other name, and the defaults it
// gives are the Default constants (a duration written "1 s", "1 min"; a
// count "1<<N").
func TestReadmeOptionsMatchStruct(t *testing.T) {
	rows := readmeTable(t, "## Options and defaults", "| field | default | meaning |")
	assert.ElementsMatch(t, exportedFields(ratedb.Options{}), slices.Collect(maps.Keys(rows)),
		"README's Options table against the fields of ratedb.Options")

	durationRE := regexp.MustCompile(`^(\d+) (ms|s|min|h)$`)
	shiftRE := regexp.MustCompile(`^1<<(\d+)$`)
	for field, want := range map[string]int64{
		"CleanPeriod":        int64(ratedb.DefaultCleanPeriod),
		"SnapshotPeriod":     int64(ratedb.DefaultSnapshotPeriod),
		"OpenTimeout":        int64(ratedb.DefaultOpenTimeout),
		"MaxHotKeys":         ratedb.DefaultMaxHotKeys,
		"MaxSnapshotBacklog": ratedb.DefaultMaxSnapshotBacklog,
	} {
		row, ok := rows[field]
		if !assert.True(t, ok, "%s is in the table", field) {
			continue
		}
		cell, _, _ := strings.Cut(row[0], " (")
		var got int64
		if m := durationRE.FindStringSubmatch(cell); m != nil {
			n, err := strconv.ParseInt(m[1], 10, 64)
			require.NoError(t, err)
			got = n * int64(map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "min": time.Minute, "h": time.Hour}[m[2]])
		} else if m := shiftRE.FindStringSubmatch(cell); m != nil {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			got = 1 << n
		} else {
			t.Errorf("the README's default of %s, %q, is neither a duration nor 1<<N", field, row[0])
			continue
		}
		assert.Equal(t, want, got, "the README's default of %s (%q)", field, row[0])
	}
}

// TestReadmeNamesExist: the names the README gives the library's Stats
// fields and sentinel errors are real ones, and it names every sentinel
// error of errors.go (where all of them live), since it has no table of
// either.
func TestReadmeNamesExist(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	text := string(readme)

	stats := exportedFields(ratedb.Stats{})
	for _, m := range regexp.MustCompile(`\bStats\.([A-Za-z0-9_]+)`).FindAllStringSubmatch(text, -1) {
		assert.Contains(t, stats, m[1], "the README names Stats.%s", m[1])
	}

	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "errors.go", nil, 0)
	require.NoError(t, err)
	sentinels := map[string]bool{}
	for _, decl := range f.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				for _, name := range spec.(*ast.ValueSpec).Names {
					if name.IsExported() {
						sentinels[name.Name] = true
					}
				}
			}
		}
	}
	require.NotEmpty(t, sentinels)
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`(?:ratedb\\.)?(Err[A-Za-z0-9_]*)`").FindAllStringSubmatch(text, -1) {
		named[m[1]] = true
		assert.True(t, sentinels[m[1]], "the README names %s, which errors.go does not declare", m[1])
	}
	for name := range sentinels {
		assert.True(t, named[name], "the README never names %s", name)
	}
}

// TestReadmePackagesExist: every path of the README's package table is a
// directory of Go code, and the rows that say "its own module" are exactly
// the modules go.work ties together besides the root.
func TestReadmePackagesExist(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	text := string(readme)
	i := strings.Index(text, "## Packages\n")
	require.GreaterOrEqual(t, i, 0, "the README's package table")
	const header = "| path | what |\n|---|---|\n"
	j := strings.Index(text[i:], header)
	require.GreaterOrEqual(t, j, 0, "the package table")
	rowRE := regexp.MustCompile("^\\| `([^`]+)` \\|(.*)\\|$")
	var modules []string
	rows := 0
	for _, line := range strings.Split(text[i+j+len(header):], "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		m := rowRE.FindStringSubmatch(line)
		require.NotNil(t, m, "a row naming one path in backquotes: %s", line)
		rows++
		goFiles, err := filepath.Glob(filepath.Join(m[1], "*.go"))
		require.NoError(t, err)
		assert.NotEmpty(t, goFiles, "the README lists %s, which holds no Go code", m[1])
		if strings.Contains(m[2], "its own module") {
			modules = append(modules, m[1])
		}
	}
	require.NotZero(t, rows)

	work, err := os.ReadFile("go.work")
	require.NoError(t, err)
	use := regexp.MustCompile(`(?s)\nuse \((.*?)\)`).FindStringSubmatch(string(work))
	require.NotNil(t, use, "go.work's use block")
	var workModules []string
	for _, dir := range strings.Fields(use[1]) {
		if dir = filepath.Clean(dir); dir != "." {
			workModules = append(workModules, dir)
		}
	}
	assert.ElementsMatch(t, workModules, modules, "go.work's modules against the README's rows saying \"its own module\"")
}
