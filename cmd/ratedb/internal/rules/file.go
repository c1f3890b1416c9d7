package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/yamlerr"
)

// File is the format of a rule file (--rules): YAML, or JSON (which YAML
// reads too), with a list of rules under "rules", each with a name:
//
//	rules:
//	  - name: bulk
//	    client_id: "*"
//	    route: "/api/v1/bulk/*"
//	    algorithm: fixed
//	    limit: 1000
//	    window: 1m
type File struct {
	Rules []Spec `yaml:"rules"`
}

// ParseFile reads a rule file and validates every rule, reporting every
// problem of every rule at once (a *ValidationError wrapping
// ErrInvalidRule). Unknown fields are problems too. Of a rule of more than
// MaxTiers tiers, only the first MaxTiers are checked (Build), but for the
// values of a wrong type and the unknown fields the YAML parser reports in
// every tier. The problems give a
// line and a reason but never quote the file (a value, an unknown field's
// name): the file may be a keys file given by mistake.
func ParseFile(data []byte) ([]*Rule, error) {
	var f File
	var p problems
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		// An unknown field or a value of the wrong type is a TypeError,
		// after which yaml.v3 has decoded everything else: the rules are
		// still checked, so every problem is reported at once.
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, &ValidationError{Problems: []string{"not a rule file: " + yamlerr.Describe(err)}}
		}
		// The parser's messages quote the file (ten bytes of a value, a
		// field's name): a keys file given by mistake would show part of
		// a key. They are rewritten to quote nothing.
		for _, e := range yamlerr.Entries(te) {
			p.add("%s%s", e, fieldsHint(e))
		}
	}
	// A second document would otherwise be ignored, its rules unchecked.
	// What follows the first document may also fail to parse (a keys file
	// given by mistake, whose comment line ends its first "document"):
	// that is a syntax error at its line, not a second document.
	var more yaml.Node
	switch err := dec.Decode(&more); {
	case err == nil:
		p.add("the file holds more than one YAML document (a second one after ---): put every rule in the one list under rules:")
	case !errors.Is(err, io.EOF):
		p.add("not a rule file: %s", yamlerr.Describe(err))
	}
	// yaml.v3 truncates a float into an int64 ("limit: 0.5" would be 0,
	// deny all): a limit must be written as an integer, as the API wants.
	var root yaml.Node
	if yaml.Unmarshal(data, &root) == nil {
		checkIntegerLimits(&root, &p)
	}
	var rs []*Rule
	seen := map[string]int{}
	for i, s := range f.Rules {
		r, err := Build(s.Name, s, false)
		var ve *ValidationError
		if errors.As(err, &ve) {
			for _, q := range ve.Problems {
				p.add("rules[%d] (%s): %s", i, truncate(s.Name), q)
			}
			continue
		}
		if j, dup := seen[s.Name]; dup {
			p.add("rules[%d]: name %q repeats rules[%d]", i, truncate(s.Name), j)
			continue
		}
		seen[s.Name] = i
		rs = append(rs, r)
	}
	if len(p) > 0 {
		return nil, &ValidationError{Problems: p}
	}
	return rs, nil
}

// fieldsHint returns, for a problem about an unknown field in one of the
// file's types, the fields that type has (the field is not named, as it
// could be part of a secret).
func fieldsHint(problem string) string {
	switch {
	case strings.HasSuffix(problem, "unknown field in rules.File"):
		return " (a rule file has only rules:)"
	case strings.HasSuffix(problem, "unknown field in rules.Spec"):
		return " (a rule's fields are name, client_id, route, algorithm, limit, window and tiers)"
	case strings.HasSuffix(problem, "unknown field in rules.TierSpec"):
		return " (a tier's fields are limit and window)"
	}
	return ""
}

// checkIntegerLimits adds a problem for each rules[i].limit or
// rules[i].tiers[j].limit of the document root that is a scalar other than
// an integer (or null). Of more than MaxTiers tiers, only the first
// MaxTiers are checked, as Build checks them (the rule is refused for
// their number).
func checkIntegerLimits(root *yaml.Node, p *problems) {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return
	}
	list := mappingValue(root.Content[0], "rules")
	if list == nil || list.Kind != yaml.SequenceNode {
		return
	}
	check := func(where string, n *yaml.Node) {
		if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() != "!!int" && n.ShortTag() != "!!null" {
			p.add("%s.limit is not an integer", where)
		}
	}
	for i, r := range list.Content {
		check(fmt.Sprintf("rules[%d]", i), mappingValue(r, "limit"))
		if tiers := mappingValue(r, "tiers"); tiers != nil && tiers.Kind == yaml.SequenceNode {
			for j, t := range tiers.Content[:min(len(tiers.Content), MaxTiers)] {
				check(fmt.Sprintf("rules[%d].tiers[%d]", i, j), mappingValue(t, "limit"))
			}
		}
	}
}

// mappingValue is the value of key in the mapping node m, nil if none.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
