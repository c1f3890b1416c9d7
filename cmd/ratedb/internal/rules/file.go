package rules

import (
	"bytes"
	"errors"
	"io"

	"gopkg.in/yaml.v3"
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
// ErrInvalidRule). Unknown fields are problems too.
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
			return nil, &ValidationError{Problems: []string{"not a rule file: " + err.Error()}}
		}
		for _, e := range te.Errors {
			p.add("%s", e)
		}
	}
	// A second document would otherwise be ignored, its rules unchecked.
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		p.add("the file holds more than one YAML document (a second one after ---): put every rule in the one list under rules:")
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
