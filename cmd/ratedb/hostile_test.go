package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileSeed seeds TestHostileHTTPRequests; RATEDB_HOSTILE_SEED overrides
// it to explore other sequences (the failure message names the seed).
const hostileSeed = 20261123

// secret is part of every client id, route and wrong API key the hostile
// tests send: none may ever reach the log.
const secret = "SECRETzq"

// rawReq is one HTTP/1.1 request, written byte by byte (so that it may be
// anything a client can send, not only what net/http's client allows), with
// the answers it may get.
type rawReq struct {
	name    string
	method  string
	target  string   // the request-target, as sent
	keys    []string // X-API-Key header lines, in order
	ctype   string   // Content-Type ("": none)
	extra   string   // more header lines, each ending in \r\n
	body    []byte
	chunked bool   // send the body chunked, without Content-Length
	raw     []byte // when not nil, sent instead of all of the above
	// want lists the statuses the request may get; protocol marks answers
	// net/http gives before any handler runs (plain text, not the API's
	// JSON).
	want     []int
	protocol bool
	// counted is the client id and route a valid check counts ("" for a
	// request that must count nothing).
	counted string
}

func (r *rawReq) bytes(rng *rand.Rand) []byte {
	if r.raw != nil {
		return r.raw
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: ratedb\r\nConnection: close\r\n", r.method, r.target)
	for _, k := range r.keys {
		fmt.Fprintf(&b, "X-API-Key: %s\r\n", k)
	}
	if r.ctype != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", r.ctype)
	}
	b.WriteString(r.extra)
	if !r.chunked {
		if !strings.Contains(r.extra, "Content-Length:") {
			fmt.Fprintf(&b, "Content-Length: %d", len(r.body))
		}
		b.WriteString("\r\n\r\n")
		b.Write(r.body)
		return b.Bytes()
	}
	b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	for rest := r.body; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(4096))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, rest[:n])
		rest = rest[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.Bytes()
}

// send writes req on a new connection to addr and reads the answer. The
// request is written while the answer is read: a server that answers
// before reading the whole body (401, 413) must not make the write block.
func sendRaw(t *testing.T, addr string, req []byte, head bool) (*http.Response, []byte, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(20*time.Second)))
	go func() { _, _ = conn.Write(req) }()
	var r *http.Request
	if head {
		r = &http.Request{Method: http.MethodHead}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), r)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// hostileGen builds the hostile requests from a seeded generator.
type hostileGen struct {
	rng *rand.Rand
	n   int // to make each secret value unique
}

func (g *hostileGen) pick(s ...string) string { return s[g.rng.IntN(len(s))] }

// id is a client id or route holding the secret, unique to this request.
func (g *hostileGen) id(prefix string) string {
	g.n++
	return prefix + secret + strconv.Itoa(g.n)
}

func q(s string) string { return `"` + s + `"` } // s must need no escaping

// validPairs are the only client ids and routes valid checks use, so that
// the windows they open are known.
var validPairs = [][2]string{{"c1" + secret, "/r1" + secret}, {"c2" + secret, "/r2" + secret}, {"c\x00" + secret, "/r1" + secret}}

// validCheck returns a valid check body, in one of several spellings, and
// the pair it counts.
func (g *hostileGen) validCheck() (string, []byte) {
	p := validPairs[g.rng.IntN(2)]
	c, r := q(p[0]), q(p[1])
	var body string
	switch g.rng.IntN(8) {
	case 0:
		body = `{"client_id":` + c + `,"route":` + r + `}`
	case 1:
		body = `{"route":` + r + `,"cost":null,"client_id":` + c + `}`
	case 2:
		body = " \t\r\n{ \"client_id\" : " + c + " ,\n\"route\":" + r + ", \"cost\" : " + strconv.Itoa(1+g.rng.IntN(3)) + " }\n "
	case 3:
		// An escaped member name decodes to the member's name.
		body = `{"\u0063lient_id":` + c + `,"route":` + r + `}`
	case 4:
		// Escapes in values decode to the same id.
		body = `{"client_id":"\u0063` + p[0][1:] + `","route":"\/` + p[1][1:] + `"}`
	case 5:
		// A NUL, escaped, is a character like another.
		p = validPairs[2]
		body = `{"client_id":"c\u0000` + secret + `","route":` + q(p[1]) + `}`
	case 6:
		body = `{"client_id":` + c + `,"route":` + r + `,"cost":1000000}`
	default:
		body = `{"cost":1,"route":` + r + `,"client_id":` + c + `}`
	}
	return p[0] + "|" + p[1], []byte(body)
}

// badCheck returns a check body that must be refused, and the status: 400,
// or 413 when the body is over 8 KiB.
func (g *hostileGen) badCheck() (string, []byte) {
	rng := g.rng
	c, r := q(g.id("c")), q(g.id("/r"))
	obj := func(members ...string) string { return "{" + strings.Join(members, ",") + "}" }
	cm, rm := `"client_id":`+c, `"route":`+r
	invalidUTF8 := []string{"\xff", "\xfe", "\x80", "\xc3", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf8\x88\x80\x80\x80"}
	switch k := rng.IntN(20); k {
	case 0: // a value of another type
		v := g.pick("1", "-1", "true", "false", "null", "{}", "[]", `[""]`, "1.5", `{"a":1}`)
		if rng.IntN(2) == 0 {
			return "client_id type", []byte(obj(`"client_id":`+v, rm))
		}
		return "route type", []byte(obj(cm, `"route":`+v))
	case 1: // a cost that is not an integer from 1 to 1,000,000
		v := g.pick("0", "-0", "-1", "1000001", "-9223372036854775808", "9223372036854775807", "9223372036854775808",
			"99999999999999999999999999", "1e400", "-1e400", "1e3", "1.0", "1.5", "0.5", `"1"`, "true", "[]", "{}", "[1]",
			"1"+strings.Repeat("0", 7+rng.IntN(300)), "-"+strings.Repeat("9", 1+rng.IntN(300)), "4.9e-324")
		return "cost " + v[:min(len(v), 12)], []byte(obj(cm, rm, `"cost":`+v))
	case 2: // not JSON numbers at all
		v := g.pick("01", "+1", "NaN", "Infinity", "-Infinity", "0x10", ".5", "1.", "1e", "--1", "1_000")
		return "cost not JSON", []byte(obj(cm, rm, `"cost":`+v))
	case 3: // a member given twice
		dup := g.pick(cm, rm, `"cost":1`, `"client_id":"\u0063"`, `"\u0063lient_id":`+c)
		m := []string{cm, rm, dup}
		if dup == `"cost":1` {
			m[0] = `"cost":2`
			m = append(m, cm)
		}
		rng.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
		return "duplicate member", []byte(obj(m...))
	case 4: // a member of another name
		name := g.pick("Client_id", "CLIENT_ID", "clientId", "client_id ", " client_id", "client_id\u0000", "", "x", "Route", "COST", "client_\u0130d", "client_ıd", "clieNt_id")
		return "unknown member", []byte(obj(`"`+name+`":`+c, rm))
	case 5: // missing or empty fields
		return "missing", []byte(g.pick(obj(cm), obj(rm), "{}", obj(`"client_id":""`, rm), obj(cm, `"route":""`), obj(`"cost":1`)))
	case 6: // too long, under the body limit or over it
		long := `"` + secret + strings.Repeat("x", 513-len(secret)+rng.IntN(10000)) + `"`
		if rng.IntN(2) == 0 {
			return "long client_id", []byte(obj(`"client_id":`+long, rm))
		}
		return "long route", []byte(obj(cm, `"route":`+long))
	case 7: // bytes that are not UTF-8, in a value or between tokens
		bad := g.pick(invalidUTF8...)
		s := g.id("c")
		i := rng.IntN(len(s) + 1)
		if rng.IntN(3) == 0 {
			return "not UTF-8 between tokens", []byte("{" + bad + cm + "," + rm + "}")
		}
		return "not UTF-8", []byte(obj(`"client_id":"`+s[:i]+bad+s[i:]+`"`, rm))
	case 8: // control characters, raw, in a string
		ctl := string(rune(rng.IntN(0x20)))
		return "raw control character", []byte(obj(`"client_id":"`+secret+ctl+`"`, rm))
	case 9: // U+FFFD however written, and lone surrogates
		v := g.pick(`\ud800`, `\udfff`, `\ud800\u0041`, `\udbff`, `\ufffd`, `\uFFFD`, "\uFFFD", `\ud83d`)
		return "U+FFFD", []byte(obj(`"client_id":"`+secret+v+`"`, rm))
	case 10: // invalid escapes
		v := g.pick(`\x41`, `\u12`, `\U0041`, `\`, `\a`, `\u`, `\uzzzz`, `\0`)
		return "bad escape", []byte(obj(`"client_id":"`+secret+v+`"`, rm))
	case 11: // data after the object
		return "trailing data", []byte(obj(cm, rm) + g.pick("x", "{}", "[]", "null", "\x00", "}", ",", `"a"`, "1", obj(cm, rm)))
	case 12: // not one object
		return "not an object", []byte(g.pick("", " ", "null", "true", "1", `"x"`, "[]", "[{}]", "{", "}", "{]", `{"client_id"}`, `{"client_id":}`,
			`{"client_id":`+c+`,}`, `{,}`, "\xef\xbb\xbf"+obj(cm, rm), "\x00"+obj(cm, rm), obj(cm, rm)[1:]))
	case 13: // deep nesting, in a value or around the object
		n := 1 + rng.IntN(4000)
		deep := strings.Repeat("[", n) + strings.Repeat("]", n)
		switch rng.IntN(3) {
		case 0:
			return "deep value", []byte(obj(`"client_id":`+deep, rm))
		case 1:
			return "deep body", []byte(deep)
		default:
			return "deep objects", []byte(strings.Repeat(`{"client_id":`, n) + c + strings.Repeat("}", n))
		}
	case 14: // an unterminated deep value: Decoder must not recurse without end
		return "unterminated", []byte(`{"client_id":` + strings.Repeat(`[{"a":`, rng.IntN(1500)))
	case 15: // over 8 KiB of whitespace around a valid body
		pad := strings.Repeat(g.pick(" ", "\n", "\t", "\r\n"), 8<<10)
		return "padded", []byte(obj(cm, rm) + pad)
	case 16: // a cut body
		b := obj(cm, rm, `"cost":5`)
		return "cut", []byte(b[:rng.IntN(len(b))])
	case 17: // several problems at once
		return "several", []byte(obj(`"client_id":""`, `"route":5`, `"cost":-3`))
	case 18: // huge number of members
		n := 1 + rng.IntN(2000)
		return "many members", []byte("{" + cm + "," + rm + strings.Repeat(`,"x":1`, n) + "}")
	default: // a string longer than the body limit
		return "over 8 KiB", []byte(obj(`"client_id":"`+secret+strings.Repeat("y", 8<<10)+`"`, rm))
	}
}

// badRule returns a rule body that must be refused (400, or 413 over 64
// KiB).
func (g *hostileGen) badRule() (string, []byte) {
	rng := g.rng
	c := q(g.id("c") + "-*")
	m := map[string]string{"client_id": c, "route": `"*"`, "limit": "5", "window": `"1h"`}
	obj := func() string {
		var parts []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		}) {
			parts = append(parts, q(k)+":"+m[k])
		}
		rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		return "{" + strings.Join(parts, ",") + "}"
	}
	switch rng.IntN(12) {
	case 0:
		m["limit"] = g.pick("-1", "1099511627777", "1e400", "1.5", `"5"`, "true", "[]", "{}", "null", "9223372036854775808", "-9223372036854775809")
		return "limit", []byte(obj())
	case 1:
		m["window"] = g.pick(`""`, `"soon"`, `"0s"`, `"1ns"`, `"1500us"`, `"8785h"`, `"-1h"`, "5", `"1h\u0000"`, `"`+strings.Repeat("9", 300)+`h"`, "null", `"1d"`)
		return "window", []byte(obj())
	case 2:
		f := g.pick("client_id", "route")
		long := strings.Repeat("z", 513)
		m[f] = g.pick(`""`, q(long), `"\ud800"`, `"\ufffd"`, "\"\xff\"", "1", "null", "[]", `"a`+string(rune(rng.IntN(0x20)))+`"`)
		return "pattern", []byte(obj())
	case 3:
		m["algorithm"] = g.pick(`"sliding"`, `"token_bucket"`, `"FIXEDX"`, "1", "[]", `"\ud800"`)
		return "algorithm", []byte(obj())
	case 4:
		delete(m, "limit")
		delete(m, "window")
		var tiers []string
		for i := range 17 {
			tiers = append(tiers, fmt.Sprintf(`{"limit":1,"window":"%dm"}`, i+1))
		}
		m["tiers"] = g.pick("[]", "[[]]", "[1]", `{"limit":1}`, "[null]", `[{"limit":1,"window":"1h","x":1}]`,
			`[{"limit":1,"limit":2,"window":"1h"}]`, `[{"limit":1,"window":"1h"},{"limit":2,"window":"60m"}]`,
			"["+strings.Join(tiers, ",")+"]", strings.Repeat("[", 3000)+strings.Repeat("]", 3000), `[{"Limit":1,"window":"1h"}]`)
		return "tiers", []byte(obj())
	case 5:
		m["tiers"] = `[{"limit":1,"window":"1m"}]`
		return "limit and tiers", []byte(obj())
	case 6:
		m[g.pick("Limit", "x", "name", "Client_ID", "")] = "1"
		return "unknown member", []byte(obj())
	case 7:
		b := obj()
		return "duplicate member", []byte(b[:len(b)-1] + `,"limit":6}`)
	case 8:
		b := obj()
		return "not one object", []byte(g.pick(b+"x", b+b, b[:rng.IntN(len(b))], "\xef\xbb\xbf"+b, "[]", "null", "", b[1:]))
	case 9:
		b := obj()
		i := 1 + rng.IntN(len(b)-1)
		return "not UTF-8", []byte(b[:i] + g.pick("\xff", "\xc3", "\xed\xa0\x80") + b[i:])
	case 10:
		return "over 64 KiB", []byte(obj() + strings.Repeat(" ", 64<<10))
	default:
		return "several", []byte(`{"client_id":"","route":5,"limit":-1,"window":"soon","algorithm":"x"}`)
	}
}

var contentTypes = []string{"", "application/json", "text/plain", "application/x-www-form-urlencoded",
	"multipart/form-data; boundary=x", "application/json; charset=latin1", "application/xml", "*/*", "application/json, text/plain"}

// hostileRequests builds n requests, most of them bad, against every route
// the README documents.
func hostileRequests(g *hostileGen, n int) []*rawReq {
	rng := g.rng
	goodKey := func() []string { return []string{g.pick(clientKey, adminKey)} }
	badKeys := func() []string {
		switch rng.IntN(9) {
		case 0:
			return nil
		case 1:
			return []string{""}
		case 2:
			return []string{g.id("wrong-")}
		case 3:
			return []string{clientKey, clientKey}
		case 4:
			return []string{clientKey, g.id("wrong-")}
		case 5:
			return []string{strings.ToUpper(clientKey)}
		case 6:
			return []string{clientKey + "x"}
		case 7:
			return []string{g.id("wrong-") + strings.Repeat("k", rng.IntN(8000))}
		default:
			return []string{clientKey[:len(clientKey)-1]}
		}
	}
	reqs := make([]*rawReq, 0, n)
	add := func(r *rawReq) { reqs = append(reqs, r) }
	for len(reqs) < n {
		ct := g.pick(contentTypes...)
		switch k := rng.IntN(22); {
		case k < 3: // a valid check, in any spelling and content type
			pair, body := g.validCheck()
			add(&rawReq{name: "valid check", method: "POST", target: g.pick("/v1/check", "/v1/check?x=1", "/v1/check?"),
				keys: goodKey(), ctype: ct, body: body, chunked: rng.IntN(2) == 0, want: []int{200}, counted: pair})
		case k < 9: // a bad check body
			name, body := g.badCheck()
			want := 400
			if len(body) > 8<<10 {
				want = 413
			}
			add(&rawReq{name: "check: " + name, method: "POST", target: "/v1/check", keys: goodKey(), ctype: ct,
				body: body, chunked: rng.IntN(2) == 0, want: []int{want}})
		case k < 11: // a missing, unknown or repeated API key (checked before the body)
			var body []byte
			if rng.IntN(2) == 0 {
				_, body = g.validCheck()
			} else {
				_, body = g.badCheck()
			}
			extra := g.pick("", "API-Key: "+clientKey+"\r\n", "Authorization: Bearer "+clientKey+"\r\n", "x-api-key: "+g.id("wrong-")+"\r\n")
			keys := badKeys()
			if strings.HasPrefix(extra, "x-api-key") {
				keys = nil // it is the only one
			}
			add(&rawReq{name: "check: bad key", method: "POST", target: "/v1/check", keys: keys, extra: extra, ctype: ct,
				body: body, chunked: rng.IntN(2) == 0, want: []int{401}})
		case k < 12: // another method on the check API
			_, body := g.validCheck()
			m := g.pick("GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO", "post", "CONNECT")
			add(&rawReq{name: "check: method " + m, method: m, target: "/v1/check", keys: goodKey(), body: body, want: []int{405}})
		case k < 13: // a body over the limit as announced by Content-Length
			add(&rawReq{name: "check: Content-Length over the limit", method: "POST", target: "/v1/check", keys: goodKey(),
				extra: "Content-Length: " + g.pick("8193", "100000", "1073741824", "9223372036854775807"), want: []int{413}})
		case k < 16: // a bad rule on the admin API
			name, body := g.badRule()
			want := 400
			if len(body) > 64<<10 {
				want = 413
			}
			add(&rawReq{name: "rule: " + name, method: "PUT", target: "/v1/rules/" + g.pick("r1", "ok", "a.b_c:d-e"), keys: []string{adminKey},
				ctype: ct, body: body, chunked: rng.IntN(2) == 0, want: []int{want}})
		case k < 17: // an invalid rule name with a valid body
			body := []byte(`{"client_id":` + q(g.id("n")+"*") + `,"route":"*","limit":1,"window":"1s"}`)
			name := g.pick("-a", ".a", "_a", "a%20b", "%ff", "a%00", "a%2Fb", "%C3%A9", "a*", "default", strings.Repeat("a", 129), "a%0Ab", "%2E%2E")
			want := 400
			if name == "%2E%2E" {
				want = 404 // /v1/rules/.. is not a clean path
			}
			add(&rawReq{name: "rule name " + name[:min(len(name), 10)], method: "PUT", target: "/v1/rules/" + name, keys: []string{adminKey},
				body: body, want: []int{want}})
		case k < 18: // the admin API without an admin key
			body := []byte(`{"client_id":` + q(g.id("n")+"*") + `,"route":"*","limit":1,"window":"1s"}`)
			keys, want := badKeys(), 401
			if rng.IntN(2) == 0 {
				keys, want = []string{clientKey}, 403
			}
			switch rng.IntN(5) {
			case 0:
				add(&rawReq{name: "admin: PUT without admin key", method: "PUT", target: "/v1/rules/" + g.pick("ok", "new"), keys: keys, body: body, want: []int{want}})
			case 1:
				add(&rawReq{name: "admin: DELETE without admin key", method: "DELETE", target: "/v1/rules/ok", keys: keys, want: []int{want}})
			case 2:
				add(&rawReq{name: "admin: list without admin key", method: "GET", target: "/v1/rules", keys: keys, want: []int{want}})
			case 3:
				add(&rawReq{name: "admin: get without admin key", method: "GET", target: "/v1/rules/ok", keys: keys, want: []int{want}})
			default:
				add(&rawReq{name: "admin: match without admin key", method: "GET", target: "/v1/rules/match?client_id=" + g.id("c") + "&route=%2F", keys: keys, want: []int{want}})
			}
		case k < 19: // admin requests that are refused, or harmless
			switch rng.IntN(7) {
			case 0:
				add(&rawReq{name: "admin: method on list", method: g.pick("POST", "PUT", "DELETE", "PATCH", "HEAD"), target: "/v1/rules", keys: []string{adminKey}, want: []int{405}})
			case 1:
				add(&rawReq{name: "admin: method on rule", method: g.pick("POST", "PATCH", "HEAD", "OPTIONS"), target: "/v1/rules/ok", keys: []string{adminKey}, want: []int{405}})
			case 2:
				add(&rawReq{name: "admin: method on match", method: g.pick("POST", "PUT", "DELETE"), target: "/v1/rules/match", keys: []string{adminKey},
					body: []byte(`{"client_id":"*","route":"*","limit":1,"window":"1s"}`), want: []int{405}})
			case 3:
				add(&rawReq{name: "admin: absent rule", method: g.pick("GET", "DELETE"), target: "/v1/rules/" + g.pick("nope", "%ff", "%00", "default2", strings.Repeat("b", 300)),
					keys: []string{adminKey}, want: []int{404}})
			case 4:
				query := g.pick("", "?", "?client_id=", "?route=%2F", "?client_id=a", "?client_id=a&route=", "?client_id="+strings.Repeat("a", 513)+"&route=b",
					"?client_id=a;route=b", "?client_id=%zz&route=b", "?client_id=%ff&route=%fe", "?client_id=%EF%BF%BD&route=b")
				add(&rawReq{name: "admin: bad match query", method: "GET", target: "/v1/rules/match" + query, keys: []string{adminKey}, want: []int{400}})
			case 5:
				query := g.pick("?client_id=%C3%A9&route=%E2%82%AC", "?client_id=%00&route=%00", "?client_id=a&client_id=b&route=c", "?route=r&client_id="+g.id("c")+"&x=1")
				add(&rawReq{name: "admin: odd match query", method: "GET", target: "/v1/rules/match" + query, keys: []string{adminKey}, want: []int{200}})
			default:
				add(&rawReq{name: "admin: list", method: "GET", target: "/v1/rules?x=" + g.id("q"), keys: []string{adminKey}, want: []int{200}})
			}
		case k < 20: // health and metrics
			p := g.pick("/healthz", "/readyz", "/metrics")
			if rng.IntN(2) == 0 {
				add(&rawReq{name: p + " method", method: g.pick("POST", "PUT", "DELETE", "PATCH", "OPTIONS"), target: p, keys: badKeys(), body: []byte("{}"), want: []int{405}})
			} else {
				add(&rawReq{name: p, method: g.pick("GET", "HEAD"), target: p + g.pick("", "?x=1", "?"+secret), keys: badKeys(), want: []int{200}})
			}
		case k < 21: // unknown or unclean paths
			p := g.pick("/", "/v1", "/v1/", "/v2/check", "/v1/check/", "/v1//check", "/v1/./check", "/v1/check/.", "/v1/check/..", "/V1/check",
				"/v1/Check", "/v1/check%2F", "/v1/rules/", "/v1/rules//ok", "/v1/rules/ok/x", "/healthz/", "/metrics/x", "//", "/..", "/%ff",
				"/v1/check%00", "/v1/rules/a/../ok", "/"+strings.Repeat("a/", 2000))
			add(&rawReq{name: "path " + p[:min(len(p), 20)], method: g.pick("GET", "POST", "PUT", "DELETE"), target: p, keys: goodKey(), body: []byte("{}"), want: []int{404}})
		default: // what net/http itself refuses, before any handler
			add(g.protocolReq())
		}
	}
	return reqs
}

// protocolReq is a request net/http refuses before it reaches the API, with
// a plain-text answer.
func (g *hostileGen) protocolReq() *rawReq {
	body := `{"client_id":"` + g.id("c") + `","route":"/r"}`
	head := "POST /v1/check HTTP/1.1\r\nHost: ratedb\r\nConnection: close\r\nX-API-Key: " + clientKey + "\r\n"
	cl := "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
	cases := []struct {
		name string
		raw  string
		want []int
	}{
		{"garbage", "GARBAGE\r\n\r\n", []int{400}},
		{"no Host", "POST /v1/check HTTP/1.1\r\nX-API-Key: " + clientKey + "\r\n" + cl + "\r\n" + body, []int{400}},
		{"two Hosts", head + "Host: other\r\n" + cl + "\r\n" + body, []int{400}},
		{"bad Content-Length", head + "Content-Length: " + g.pick("-1", "abc", "1 2", "0x10", "99999999999999999999") + "\r\n\r\n" + body, []int{400}},
		{"two Content-Lengths", head + cl + "Content-Length: 3\r\n\r\n" + body, []int{400}},
		{"Content-Length and chunked", head + cl + "Transfer-Encoding: chunked\r\n\r\n" + body + "\r\n", []int{400}},
		{"bad header name", head + "Bad Header: x\r\n" + cl + "\r\n" + body, []int{400}},
		{"header without colon", head + "NoColon\r\n" + cl + "\r\n" + body, []int{400}},
		{"NUL in header", head + "X-A: a\x00b\r\n" + cl + "\r\n" + body, []int{400}},
		{"NUL in path", "POST /v1/check\x00 HTTP/1.1\r\nHost: r\r\n" + cl + "\r\n" + body, []int{400}},
		{"space in path", "GET /v1/ch eck HTTP/1.1\r\nHost: r\r\n\r\n", []int{400}},
		{"bad chunk size", head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + body + "\r\n0\r\n\r\n", []int{400}},
		{"huge chunk size", head + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n" + body + "\r\n0\r\n\r\n", []int{400}},
		{"headers over the limit", head + "X-Big: " + strings.Repeat("b", 24<<10) + "\r\n" + cl + "\r\n" + body, []int{431}},
		{"header over the limit", head + "X-API-Key: " + strings.Repeat("k", 24<<10) + "\r\n" + cl + "\r\n" + body, []int{431}},
		{"unknown expectation", head + "Expect: " + g.pick("foo", "100-continue, foo") + "\r\n" + cl + "\r\n" + body, []int{417}},
		{"HTTP/0.9", "GET /healthz\r\n\r\n", []int{400}},
		{"HTTP/1.0 without Host", "GET /healthz HTTP/1.0\r\n\r\n", []int{200}},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: r\r\n\r\n", []int{200}},
		// RFC 9112 asks for 501 for a transfer coding the server does not
		// implement, and RFC 9110 for 505 for a major version it does
		// not support: net/http answers so, as it should.
		{"unknown transfer coding", head + "Transfer-Encoding: " + g.pick("gzip", "gzip, chunked", "identity", "x") + "\r\n\r\n" + body, []int{501, 400}},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", []int{404}},
		{"HTTP/3", "GET /healthz HTTP/3.0\r\nHost: r\r\n\r\n", []int{505, 400}},
	}
	if g.rng.IntN(len(cases)+1) == 0 {
		// The absolute form names /v1/check: the API answers (400, for a
		// cost of 0).
		bad := `{"client_id":"` + g.id("c") + `","route":"/r","cost":0}`
		return &rawReq{name: "absolute form", want: []int{400}, raw: []byte("POST http://ratedb/v1/check HTTP/1.1\r\nHost: ratedb\r\nConnection: close\r\nX-API-Key: " +
			clientKey + "\r\nContent-Length: " + strconv.Itoa(len(bad)) + "\r\n\r\n" + bad)}
	}
	c := cases[g.rng.IntN(len(cases))]
	// OPTIONS * is net/http's own answer; GET /healthz and PRI * (no h2c
	// here: an unknown path) are the API's.
	api := c.name == "HTTP/1.0 without Host" || c.name == "HTTP/2 preface"
	return &rawReq{name: "protocol: " + c.name, raw: []byte(c.raw), want: c.want, protocol: !api}
}

// assertCleanLogs fails the test for each log line that holds a request's
// secret value or an API key, tells of a panic or holds one of more.
func assertCleanLogs(t *testing.T, logs string, more ...string) {
	t.Helper()
	bad := append([]string{secret, clientKey, adminKey, "panic", "goroutine ", "runtime error", "fatal error", "superfluous"}, more...)
	found := 0
	for _, line := range strings.Split(logs, "\n") {
		for _, b := range bad {
			if strings.Contains(line, b) {
				found++
				if found <= 5 {
					t.Errorf("a log line holds %q: %.500s", b, line)
				}
			}
		}
	}
	if found > 5 {
		t.Errorf("... %d such lines in all", found)
	}
}

// metricValue reads one sample of /metrics.
func metricValue(t *testing.T, s *service, name string) float64 {
	t.Helper()
	_, _, body := s.do("GET", "/metrics", "", "")
	var sum float64
	found := false
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(t, err, line)
			sum += v
			found = true
		}
	}
	require.True(t, found, "%s is not in /metrics", name)
	return sum
}

// TestHostileHTTPRequests throws about 1,500 requests, most of them
// malformed or hostile, at every route of the HTTP API (check, rules
// admin, health, metrics, unknown paths, and what net/http refuses
// itself), with connections that stall mid-headers, mid-body or never end
// their chunked body alongside. Every request must get one of the answers
// its kind documents (never a 5xx but net/http's 501 and 505, which RFC
// 9112 and 9110 ask for), as the API's JSON error body when the API
// answered; the process must stay up without a panic; the bad requests
// must create no window and no rule (counted on /metrics, in GET
// /v1/rules and by inspect after the stop); and no client id, route or
// API key may reach the log, even at debug level.
func TestHostileHTTPRequests(t *testing.T) {
	t.Parallel()
	seed := uint64(hostileSeed)
	if v := os.Getenv("RATEDB_HOSTILE_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
	}
	db := filepath.Join(t.TempDir(), "s.db")
	s := start(t, db, "--log-level", "debug", "--default-algorithm", "per_key", "--default-window", "1h", "--default-limit", "1000000")
	addr := strings.TrimPrefix(s.url, "http://")

	// One rule, which no request below may change or delete.
	code, _, body := s.do("PUT", "/v1/rules/ok", adminKey, `{"client_id":"ctl-*","route":"*","limit":7,"window":"1h"}`)
	require.Equal(t, http.StatusCreated, code, body)

	// Connections that never finish: the server's timeouts must end them
	// (read-header 5 s, read 10 s), in parallel with the requests below.
	var slow sync.WaitGroup
	for _, c := range []struct{ name, partial string }{
		{"headers never end", "POST /v1/check HTTP/1.1\r\nHost: r\r\nX-API-Key: " + clientKey + "\r\nX-Slow: "},
		{"chunked body never ends", "POST /v1/check HTTP/1.1\r\nHost: r\r\nX-API-Key: " + clientKey + "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"cli\r\n"},
		{"body shorter than its Content-Length", "POST /v1/check HTTP/1.1\r\nHost: r\r\nX-API-Key: " + clientKey + "\r\nContent-Length: 100\r\n\r\n{\"client_id\":"},
		{"rule body never ends", "PUT /v1/rules/slow HTTP/1.1\r\nHost: r\r\nX-API-Key: " + adminKey + "\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n"},
	} {
		slow.Go(func() {
			conn, err := net.Dial("tcp", addr)
			if !assert.NoError(t, err) {
				return
			}
			defer conn.Close()
			began := time.Now()
			_, err = conn.Write([]byte(c.partial))
			assert.NoError(t, err)
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			took := time.Since(began)
			assert.Less(t, took, 20*time.Second, "%s: the server held the connection", c.name)
			if err == nil {
				// The answer to a body the timeout cut: 400, never 5xx.
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, c.name)
				_ = resp.Body.Close()
			} else {
				assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "%s: the server never closed the connection", c.name)
			}
		})
	}
	// A chunked body that never ends, sent as fast as the server reads it:
	// 413 once it passes 8 KiB.
	slow.Go(func() {
		conn, err := net.Dial("tcp", addr)
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		go func() {
			_, err := conn.Write([]byte("POST /v1/check HTTP/1.1\r\nHost: r\r\nX-API-Key: " + clientKey + "\r\nTransfer-Encoding: chunked\r\n\r\n"))
			chunk := []byte("400\r\n" + strings.Repeat(" ", 0x400) + "\r\n")
			for i := 0; err == nil && i < 64<<10; i++ { // at most 64 MiB
				_, err = conn.Write(chunk)
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if assert.NoError(t, err, "endless chunked body") {
			assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
			_ = resp.Body.Close()
		}
	})

	g := &hostileGen{rng: rand.New(rand.NewPCG(seed, 0x5eed))}
	reqs := hostileRequests(g, 1500)
	counted := map[string]int{}
	kinds := map[string]int{}
	for i, r := range reqs {
		raw := r.bytes(g.rng)
		what := fmt.Sprintf("seed %d, request %d (%s): %.300q", seed, i, r.name, raw)
		resp, body, err := sendRaw(t, addr, raw, r.method == "HEAD")
		require.NoError(t, err, what)
		kinds[r.name]++
		require.Contains(t, r.want, resp.StatusCode, "%s\nanswer: %.300s", what, body)
		if r.counted != "" {
			counted[r.counted]++
		}
		switch {
		case r.method == "HEAD" || r.protocol:
		case strings.HasPrefix(r.target, "/metrics") && resp.StatusCode == 200:
		default:
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), what)
			var a answer
			if assert.NoError(t, json.Unmarshal(body, &a), "%s\nanswer: %.300s", what, body) {
				assert.Equal(t, resp.StatusCode, a.Meta.Code, what)
				assert.NotEmpty(t, a.Meta.Message, what)
				if resp.StatusCode >= 400 {
					assert.Equal(t, "error", a.Meta.Status, what)
				}
			}
			if resp.StatusCode == http.StatusMethodNotAllowed {
				assert.NotEmpty(t, resp.Header.Get("Allow"), what)
			}
		}
		assert.NotContains(t, string(body), secret, "an answer quotes a value of the request: %s", what)
	}
	t.Logf("seed %d: %d requests of %d kinds", seed, len(reqs), len(kinds))
	slow.Wait()

	// Nothing but the valid checks counted: one window per pair they used,
	// one decision each.
	valid := 0
	for _, n := range counted {
		valid += n
	}
	require.Greater(t, len(counted), 1)
	assert.Equal(t, float64(len(counted)), metricValue(t, s, "ratedb_windows_in_memory"), "windows in memory")
	assert.Equal(t, float64(valid), metricValue(t, s, "ratedb_checks_total"), "checks decided")
	assert.Equal(t, float64(valid), metricValue(t, s, "ratedb_hits_allowed_total")+metricValue(t, s, "ratedb_hits_denied_total"), "hits")
	code, _, body = s.do("GET", "/v1/rules", adminKey, "")
	require.Equal(t, http.StatusOK, code, body)
	var list struct {
		Data struct {
			Rules []struct {
				Name     string `json:"name"`
				ClientID string `json:"client_id"`
				Limit    int64  `json:"limit"`
			} `json:"rules"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	require.Len(t, list.Data.Rules, 1, body)
	assert.Equal(t, "ok", list.Data.Rules[0].Name)
	assert.Equal(t, "ctl-*", list.Data.Rules[0].ClientID)
	assert.Equal(t, int64(7), list.Data.Rules[0].Limit)

	select {
	case <-s.done:
		t.Fatalf("the service exited: %v\n%s", s.err, s.stderr)
	default:
	}
	require.Equal(t, 0, s.stop(syscall.SIGTERM), s.stderr.String())
	assertCleanLogs(t, s.stderr.String(), "level=ERROR")

	out, stderr, code := runTool(t, "inspect", db)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, fmt.Sprintf("summary: %d records", len(counted)), "only the valid checks' windows were written")
	assert.NotContains(t, out, "default#0|"+strconv.Itoa(len(secret)+4)+"|c"+secret+"1", "no bad request's window")
}
