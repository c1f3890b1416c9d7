package bench

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// commandFlags returns the flags each command under cmd/ defines, by
// command name, read from its source: the name of every
// fs.Int("name", ...) or fs.IntVar(&v, "name", ...) call (of a FlagSet or
// of package flag), whatever the type.
func commandFlags(t *testing.T) map[string][]string {
	t.Helper()
	defines := regexp.MustCompile(`^(Bool|Int|Int64|Uint|Uint64|Float64|String|Duration|Func|Text)(Var)?$`)
	dirs, err := filepath.Glob("cmd/*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(dir)
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !defines.MatchString(sel.Sel.Name) {
					return true
				}
				arg := 0
				if strings.HasSuffix(sel.Sel.Name, "Var") {
					arg = 1
				}
				if len(call.Args) <= arg {
					return true
				}
				if lit, ok := call.Args[arg].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						out[name] = append(out[name], s)
					}
				}
				return true
			})
		}
	}
	return out
}

// readmeFlags returns the flags the text names for each command: on a line
// that mentions ./cmd/NAME or `cmd/NAME`, every -flag after the mention
// (up to the next command's) is NAME's, and so are those of the next line
// when the line ends in a comma (a list of flags that wraps).
func readmeFlags(text string) map[string][]string {
	mention := regexp.MustCompile("(?:\\./|`)cmd/([a-z]+)")
	flagRe := regexp.MustCompile("(?:^|[\\s\\[(,;`])-([a-z][a-z0-9-]*)")
	out := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		segs := mention.FindAllStringSubmatchIndex(line, -1)
		if len(segs) == 0 {
			if cur != "" {
				for _, m := range flagRe.FindAllStringSubmatch(line, -1) {
					out[cur] = append(out[cur], m[1])
				}
			}
		}
		for i, s := range segs {
			end := len(line)
			if i+1 < len(segs) {
				end = segs[i+1][0]
			}
			cmd := line[s[2]:s[3]]
			for _, m := range flagRe.FindAllStringSubmatch(line[s[1]:end], -1) {
				out[cmd] = append(out[cmd], m[1])
			}
			cur = cmd
		}
		if !strings.HasSuffix(strings.TrimSpace(line), ",") {
			cur = ""
		}
	}
	return out
}

// TestReadmeFlagNamesExist: every flag the READMEs (the root's, whose
// Performance and "At a million keys" sections give the commands, and
// this module's) and the commands' doc comments name on a command line or
// in a list of a command's flags is one that command defines.
func TestReadmeFlagNamesExist(t *testing.T) {
	defined := commandFlags(t)
	for _, cmd := range []string{"compare", "flood", "grpcload", "httpload", "membreak", "redisbench", "steady"} {
		if len(defined[cmd]) == 0 {
			t.Errorf("found no flag defined by cmd/%s: the parse of its source missed them", cmd)
		}
	}
	docs, err := filepath.Glob("cmd/*/main.go") // their doc comments give commands too
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, path := range append([]string{"../README.md", "README.md"}, docs...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for cmd, flags := range readmeFlags(string(b)) {
			if defined[cmd] == nil {
				t.Errorf("%s names cmd/%s, which is not a command under cmd/", path, cmd)
				continue
			}
			for _, f := range flags {
				checked++
				if !slices.Contains(defined[cmd], f) {
					t.Errorf("%s names -%s for cmd/%s, which defines no such flag (it has %v)", path, f, cmd, defined[cmd])
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("checked only %d flag names in the READMEs: the parse missed the command lines", checked)
	}
}

// TestReadmeFlagsParse checks readmeFlags on the shapes of line the
// READMEs use, so that TestReadmeFlagNamesExist cannot pass by finding
// nothing.
func TestReadmeFlagsParse(t *testing.T) {
	text := "cd bench && go run ./cmd/steady -keys 1000 -warmup 5s   # workload 7; -limiters, -fresh-keys\n" +
		"go run ./cmd/flood -keys 20 [-backlog N] [-memprofile f]\n" +
		"- **`cmd/compare` runs the limiters in one fixed order**, ratedb first; `cmd/steady -rounds` (issue 11)\n" +
		"`cmd/compare` flags: `-quick`, `-runs N`, `-out dir`,\n" +
		"`-big` (live windows of workload 4), `-nobig`.\n" +
		"Not a flag: the beyond-memory workload, -5 keys, `-bench` of go test.\n"
	got := readmeFlags(text)
	want := map[string][]string{
		"steady":  {"keys", "warmup", "limiters", "fresh-keys", "rounds"},
		"flood":   {"keys", "backlog", "memprofile"},
		"compare": {"quick", "runs", "out", "big", "nobig"},
	}
	for cmd, w := range want {
		if !slices.Equal(got[cmd], w) {
			t.Errorf("%s: got %v, want %v", cmd, got[cmd], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got flags of %d commands, want %d: %v", len(got), len(want), got)
	}
}

// citedResults returns the raw files text cites: every lower-case
// `name.txt` or `name.json` in backticks (a glob such as
// `snapshot-1M-*.txt` included), with or without a leading bench/results/,
// and every Markdown link to a file under (bench/)results/.
func citedResults(text string) []string {
	tick := regexp.MustCompile("`(?:bench/results/)?([a-z0-9*][A-Za-z0-9*-]*\\.(?:txt|json))`")
	link := regexp.MustCompile(`\]\((?:bench/)?results/([^)\s]+)\)`)
	var out []string
	for _, re := range []*regexp.Regexp{tick, link} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// TestReadmeCitedResultsExist: every raw file the READMEs cite for a
// figure (README.md's Performance and issue 11 sections name them in
// backticks) is under results/, and every glob matches one.
func TestReadmeCitedResultsExist(t *testing.T) {
	checked := 0
	for _, path := range []string{"../README.md", "README.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range citedResults(string(b)) {
			checked++
			matches, err := filepath.Glob(filepath.Join("results", name))
			if err != nil {
				t.Fatal(err)
			}
			if len(matches) == 0 {
				t.Errorf("%s cites %s, which matches no file under bench/results", path, name)
			}
		}
	}
	if checked < 25 {
		t.Errorf("found only %d cited raw files in the READMEs: the parse missed them", checked)
	}
}

// TestCitedResultsParse checks citedResults on the shapes the READMEs use,
// so that TestReadmeCitedResultsExist cannot pass by finding nothing.
func TestCitedResultsParse(t *testing.T) {
	text := "(`clock-f4cf808.txt`), `bench/results/flood-20M-cb204ab*.txt`, `snapshot-1M-*.txt`,\n" +
		"[bench/results/RESULTS.md](bench/results/RESULTS.md) (`raw-bfb3efd.json`), [results](results/chart.svg)\n" +
		"Not raw files: `PATH.rules.json`, `example_test.go`, [Envoy](#use-with-envoy).\n"
	want := []string{"clock-f4cf808.txt", "flood-20M-cb204ab*.txt", "snapshot-1M-*.txt", "raw-bfb3efd.json", "RESULTS.md", "chart.svg"}
	if got := citedResults(text); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestReadmePerformanceTableIsResults: the table of ns per hit and bytes
// per key in README.md's Performance section holds, row for row, the
// figures of the summary table of results/RESULTS.md, which
// `go run ./cmd/compare -runs 3` writes.
func TestReadmePerformanceTableIsResults(t *testing.T) {
	names := map[string]string{
		"ratedb, file":         "RatedbFile",
		"ratedb, memory only":  "RatedbMem",
		"sethvargo/go-limiter": "GoLimiter",
		"throttled v2":         "Throttled",
		"x/time/rate":          "XTimeRate",
		"go-chi/httprate":      "Httprate",
		"ulule/limiter v3":     "Ulule",
		"mutex + map (floor)":  "MutexMap",
	}
	readme := tableRows(t, "../README.md", "## Performance", "| limiter | hot key |")
	results := tableRows(t, "results/RESULTS.md", "## Summary", "| limiter | Hot key, 1 goroutine |")
	if len(readme) != len(names) {
		t.Errorf("README's table has %d rows, want %d: %v", len(readme), len(names), readme)
	}
	for name, cells := range readme {
		want, ok := results[names[name]]
		if !ok {
			t.Errorf("README's row %q is no limiter of RESULTS.md's summary", name)
			continue
		}
		if !slices.Equal(cells, want) {
			t.Errorf("README's row %q is %v, RESULTS.md's %v", name, cells, want)
		}
	}
}

// tableRows returns the rows of the first table in the file at path after
// the first line that starts with section whose header line starts with
// header: by first cell,
// the other cells, with Markdown bold removed.
func tableRows(t *testing.T, path, section, header string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n"+section)
	if i < 0 {
		t.Fatalf("%s has no section %q", path, section)
	}
	j := strings.Index(text[i:], "\n"+header)
	if j < 0 {
		t.Fatalf("%s has no table %q in %q", path, header, section)
	}
	lines := strings.Split(text[i+j+1:], "\n")
	rows := map[string][]string{}
	for _, line := range lines[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for k := range cells {
			cells[k] = strings.TrimSpace(strings.ReplaceAll(cells[k], "**", ""))
		}
		rows[cells[0]] = cells[1:]
	}
	return rows
}
