package httpapi

// decodeCheckFast decodes the common shape of a check body without
// reflection: one object whose members are "client_id" and "route" (strings
// of printable ASCII without escapes) and an optional "cost" (a positive
// integer without sign, exponent or leading zero), each at most once, with
// JSON whitespace anywhere between tokens. It reports ok false for anything
// else, and DecodeCheck then decodes with encoding/json, which defines the
// semantics (FuzzDecodeCheckFast checks that both agree). The validation of
// lengths and the cost's range is DecodeCheck's.
func decodeCheckFast(b []byte) (client, route string, cost int64, hasCost, ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	i = skipWS(b, i+1)
	var seenC, seenR bool
	for {
		if i >= len(b) || b[i] != '"' {
			return
		}
		var key string
		key, i, ok = fastString(b, i)
		if !ok {
			return
		}
		ok = false
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i = skipWS(b, i+1)
		switch key {
		case "client_id", "route":
			var v string
			v, i, ok = fastString(b, i)
			if !ok {
				return
			}
			ok = false
			if key == "client_id" {
				if seenC {
					return
				}
				seenC, client = true, v
			} else {
				if seenR {
					return
				}
				seenR, route = true, v
			}
		case "cost":
			if hasCost || i >= len(b) || b[i] < '1' || b[i] > '9' {
				return
			}
			j := i
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				if j-i >= 15 {
					return // beyond any valid cost: let encoding/json decide
				}
				cost = cost*10 + int64(b[j]-'0')
				j++
			}
			if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
				return
			}
			i, hasCost = j, true
		default:
			return
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return
		}
		if b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if b[i] != '}' {
			return
		}
		if skipWS(b, i+1) != len(b) {
			return
		}
		return client, route, cost, hasCost, true
	}
}

// fastString reads a JSON string at b[i] == '"' made of printable ASCII
// without escapes, returning the index after its closing quote.
func fastString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return "", i, false
		}
	}
	return "", i, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
