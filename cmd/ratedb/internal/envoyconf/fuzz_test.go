package envoyconf_test

import (
	"errors"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/leaktest"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// FuzzParse feeds arbitrary bytes to the loader: it must never panic, every
// error must wrap ErrInvalidConfig and quote no key-like word of the file
// other than a value of a mapping, and a loaded config must answer matches.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/basic.yaml", "testdata/wildcard.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "key1", "value1")
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - {key: a*, rate_limit: {unit: second, requests_per_unit: 1}}\n"), "ab", "")
	f.Add([]byte("a: &a [*a, *a]\n"), "a", "b")
	f.Add([]byte("# keys\n4eC39HqLyjWDarjtT1zdp7dc\ndev-0123456789abcdef\n"), "a", "b")
	f.Add([]byte("domain: d\n4eC39HqLyjWDarjtT1zdp7dc:\n  - a\n"), "a", "b")
	f.Add([]byte("domain: d\ndescriptors: 4eC39HqLyjWDarjtT1zdp7dc\n"), "a", "b")
	f.Add([]byte("- 4eC39HqLyjWDarjtT1zdp7dc\n"), "a", "b")
	f.Add([]byte("domain: d\ndescriptors:\n  - {key: k, rate_limit: {name: !!binary bv8=, unit: second, requests_per_unit: 1}}\n"), "k", "v")
	f.Fuzz(func(t *testing.T, data []byte, key, value string) {
		c, err := envoyconf.Parse([]envoyconf.File{{Name: "f.yaml", Data: data}})
		if err != nil {
			if !errors.Is(err, envoyconf.ErrInvalidConfig) {
				t.Fatalf("error does not wrap ErrInvalidConfig: %v", err)
			}
			// A keys file given by mistake: the error quotes no key-like
			// word of the file but the values it names on purpose (a
			// domain, a descriptor's key and value, a unit).
			values := mappingValues(data)
			for _, word := range leaktest.KeyWords(string(data)) {
				if w, ok := leaktest.Quotes(err.Error(), word); ok && !strings.Contains(values, w) {
					t.Fatalf("the error quotes %q, of %q in the file: %v", w, word, err)
				}
			}
			return
		}
		for _, r := range c.Rules() {
			if r.Limit == nil || (!r.Limit.Unlimited && r.Limit.Unit.Duration() == 0) {
				t.Fatalf("rule %q without a usable limit", r.Limit.Path)
			}
			if !r.Limit.Unlimited && !utf8.ValidString(r.Limit.Name) {
				// It would be sent in current_limit, a protobuf string.
				t.Fatalf("rule %q loaded with a name that is not UTF-8", r.Limit.Path)
			}
			m := c.Match(r.Domain, append(r.Descriptor, envoyconf.Entry{Key: key, Value: value}))
			if m.Limit != nil && m.Share != nil && len(m.Share) != len(r.Descriptor)+1 {
				t.Fatalf("share has %d entries for %d", len(m.Share), len(r.Descriptor)+1)
			}
		}
	})
}

// mappingValues returns every scalar of data (read by yaml.v3) in a
// mapping's value position, joined by newlines.
func mappingValues(data []byte) string {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return ""
	}
	var b strings.Builder
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for i, c := range n.Content {
			if n.Kind == yaml.MappingNode && i%2 == 1 && c.Kind == yaml.ScalarNode {
				b.WriteString(c.Value + "\n")
			}
			walk(c)
		}
	}
	walk(&root)
	return b.String()
}
