// Package yamlerr rewrites the errors of gopkg.in/yaml.v2 and
// gopkg.in/yaml.v3 so that they never quote the document they are about.
// Those parsers quote up to ten bytes of an offending value ("cannot
// unmarshal !!str `sk_live...`"), a key they could not place ("field
// sk_live not found"), an anchor's name or a map key: a keys file given by
// mistake to --rules or --envoy-config would show part of a key in the
// start-up error. The rewritten messages keep the line numbers, the YAML
// tag, the Go type expected and the parser's reason, and replace whatever
// would quote the document with a description of it.
package yamlerr

import (
	"errors"
	"regexp"
	"strings"

	yaml2 "gopkg.in/yaml.v2"
	yaml3 "gopkg.in/yaml.v3"
)

// Describe returns the message of err, an error of yaml.v2's or yaml.v3's
// Unmarshal or Decoder.Decode, quoting nothing of the document: a
// TypeError's entries (each rewritten by Entry) joined by "; ", or the
// parser's reason (with its line, if any) for a syntax error.
func Describe(err error) string {
	if es := Entries(err); es != nil {
		return strings.Join(es, "; ")
	}
	return syntax(err.Error())
}

// Entries returns the entries of err, if it is a yaml.v2 or yaml.v3
// TypeError, each rewritten by Entry; otherwise nil.
func Entries(err error) []string {
	var raw []string
	var t2 *yaml2.TypeError
	var t3 *yaml3.TypeError
	switch {
	case errors.As(err, &t3):
		raw = t3.Errors
	case errors.As(err, &t2):
		raw = t2.Errors
	default:
		return nil
	}
	out := make([]string, 0, len(raw))
	for _, e := range raw {
		out = append(out, Entry(e))
	}
	return out
}

var (
	lineRE    = regexp.MustCompile(`^(?s)line (\d+): (.*)$`)
	tagRE     = regexp.MustCompile(`^!![a-z]+$`)
	goTypeRE  = regexp.MustCompile(`^[A-Za-z0-9_.*\[\]{} ]+$`)
	definedRE = regexp.MustCompile(`already defined at line (\d+)$`)
)

// Entry rewrites one entry of a yaml.v2 or yaml.v3 TypeError ("line N:
// ..."): its line, and what went wrong, without the value, key or field
// name the parser quoted. An unknown field reads "line N: unknown field in
// T", where T is the Go type decoded into.
func Entry(e string) string {
	m := lineRE.FindStringSubmatch(e)
	if m == nil {
		return "a value that cannot be read"
	}
	where, rest := "line "+m[1]+": ", m[2]
	switch {
	case strings.HasPrefix(rest, "cannot unmarshal "):
		tag := "a value"
		if f := strings.Fields(strings.TrimPrefix(rest, "cannot unmarshal ")); len(f) > 0 && tagRE.MatchString(f[0]) {
			tag = f[0]
		}
		return where + "cannot unmarshal " + tag + into(rest)
	case strings.HasPrefix(rest, "field ") && strings.Contains(rest, " not found in type "):
		return where + "unknown field" + typ(rest, " not found in type ", " in ")
	case strings.HasPrefix(rest, "field ") && strings.Contains(rest, " already set in type "):
		return where + "a field set twice" + typ(rest, " already set in type ", " in ")
	case strings.HasPrefix(rest, "mapping key "):
		if d := definedRE.FindStringSubmatch(rest); d != nil {
			return where + "a mapping key repeats the one at line " + d[1]
		}
		return where + "a mapping key repeats an earlier one"
	case strings.HasPrefix(rest, "key ") && strings.HasSuffix(rest, " already set in map"):
		return where + "a mapping key repeats an earlier one"
	}
	return where + "a value that cannot be read"
}

// into returns " into T" for the Go type T at the end of a "cannot
// unmarshal" entry, or "" if it does not look like a Go type.
func into(rest string) string {
	return typ(rest, " into ", " into ")
}

// typ returns prefix and the Go type that follows the last sep in rest, or
// "" if there is none or it does not look like a Go type (it names a type
// of ours, never the document, but is checked all the same).
func typ(rest, sep, prefix string) string {
	i := strings.LastIndex(rest, sep)
	if i < 0 {
		return ""
	}
	t := rest[i+len(sep):]
	if !goTypeRE.MatchString(t) {
		return ""
	}
	return prefix + t
}

// quotedPunct are the quoted characters of libyaml's fixed reasons ("did
// not find expected ',' or ']'"); any other quote would quote the document.
var quotedPunct = strings.NewReplacer("','", "", "']'", "", "'}'", "", "'-'", "", "':'", "", "'!'", "", "'.'", "", "'>'", "")

// syntax rewrites a message that is not a TypeError's: "yaml: line N:
// reason" and "yaml: reason" keep reasons that quote nothing (libyaml's
// fixed texts); the others (an alias of an unknown anchor, a map key that
// cannot be one) are described.
func syntax(msg string) string {
	rest := strings.TrimPrefix(msg, "yaml: ")
	where := ""
	if m := lineRE.FindStringSubmatch(rest); m != nil {
		where, rest = "line "+m[1]+": ", m[2]
	}
	switch {
	case strings.Contains(rest, "anchor"):
		return where + "an alias of an anchor that is unknown or contains itself"
	case strings.HasPrefix(rest, "invalid map key"):
		return where + "a mapping key that cannot be one (a list or a mapping)"
	}
	if strings.ContainsAny(quotedPunct.Replace(rest), "'\"`\n") {
		return where + "not valid YAML"
	}
	return where + rest
}
