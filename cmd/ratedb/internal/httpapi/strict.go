package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// strictFields lists, by exact name, the members an object of a body may
// have. A member mapped to nil holds a scalar (a string, number, boolean or
// null); one mapped to a strictFields holds null or an array of null or of
// objects with those members (a rule's "tiers").
type strictFields map[string]strictFields

// checkStrict refuses, before encoding/json decodes body, what encoding/json
// would let through: a body that is not valid UTF-8 (it would turn each
// invalid byte into U+FFFD, so that "\xff" and "\xfe" would name one client),
// a string value holding U+FFFD (after the UTF-8 check it can only come from
// an escape of a lone surrogate such as "\ud800", or from a literal U+FFFD or
// "\ufffd": all three are refused), a member that appears twice in one object
// (encoding/json keeps the last one, a proxy may read the first), and a member
// whose name is not exactly one of fields (encoding/json matches names without
// regard to case). It also refuses a body that is not one JSON object and an
// object or array where fields expects none, and reports malformed JSON; the
// types of scalars, and what follows the object, are left to the decoding.
// Its errors name fields only by the names in fields, never a value.
func checkStrict(body []byte, fields strictFields) error {
	if !utf8.Valid(body) {
		return errors.New("the body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	// token reads the next token; where names the value it reads (a
	// member's or an element's; "" elsewhere), for a number too large for
	// the float64 Token decodes numbers to, which encoding/json reports
	// with no field ("field  must be a float64"). Only a value can be a
	// number, so with where "" it is the body itself.
	token := func(where string) (json.Token, error) {
		tok, err := dec.Token()
		if err != nil {
			var te *json.UnmarshalTypeError
			switch {
			case !errors.As(err, &te):
				return nil, errors.New(describeJSONError(err))
			case where == "":
				return nil, errors.New("the body must be a JSON object")
			default:
				return nil, fmt.Errorf("%s is a number out of range", where)
			}
		}
		return tok, nil
	}
	// object checks the members of an object whose '{' was read, up to its
	// '}'; path prefixes the names in its errors ("tiers[0].").
	var object func(fields strictFields, path string) error
	object = func(fields strictFields, path string) error {
		seen := make(map[string]bool, len(fields))
		for dec.More() {
			tok, err := token("")
			if err != nil {
				return err
			}
			name, _ := tok.(string) // a member's name is a string, or Token fails
			sub, ok := fields[name]
			if !ok {
				where := ""
				if path != "" {
					where = " in " + strings.TrimSuffix(path, ".")
				}
				return fmt.Errorf("unknown field%s; the fields are %s", where, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			}
			if seen[name] {
				return fmt.Errorf("%s%s appears twice", path, name)
			}
			seen[name] = true
			if tok, err = token(path + name); err != nil {
				return err
			}
			switch tok := tok.(type) {
			case string:
				if strings.ContainsRune(tok, utf8.RuneError) {
					return fmt.Errorf("%s%s must be valid UTF-8 and may not hold U+FFFD (the replacement character, which an escaped lone surrogate such as \\ud800 also decodes to)", path, name)
				}
			case json.Delim:
				if sub == nil {
					return fmt.Errorf("%s%s must not be an object or array", path, name)
				}
				if tok == '{' {
					return fmt.Errorf("%s%s must be an array", path, name)
				}
				for i := 0; dec.More(); i++ {
					elem, err := token(fmt.Sprintf("%s%s[%d]", path, name, i))
					if err != nil {
						return err
					}
					if elem == nil {
						continue // null: encoding/json decodes it to a zero value
					}
					if elem != json.Delim('{') {
						return fmt.Errorf("%s%s[%d] must be an object", path, name, i)
					}
					if err := object(sub, fmt.Sprintf("%s%s[%d].", path, name, i)); err != nil {
						return err
					}
				}
				if _, err := token(""); err != nil { // ']'
					return err
				}
			}
		}
		_, err := token("") // '}'
		return err
	}
	tok, err := token("")
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return errors.New("the body must be a JSON object")
	}
	return object(fields, "")
}
