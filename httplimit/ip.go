package httplimit

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// Forwarding header names understood by Proxies.
const (
	// HeaderXForwardedFor is the de-facto standard list of hops, to which
	// each proxy appends the address it received the request from.
	HeaderXForwardedFor = "X-Forwarded-For"
	// HeaderForwarded is the RFC 7239 list of hops; the middleware reads the
	// for= parameter of each element.
	HeaderForwarded = "Forwarded"
	// HeaderXRealIP is the single client address set by nginx's realip
	// configurations and others.
	HeaderXRealIP = "X-Real-IP"
)

// Proxies describes the reverse proxies in front of the server, so that the
// client's address can be read from forwarding headers. Forwarding headers
// are written by whoever sends the request: they are believed only when the
// direct peer (r.RemoteAddr) is a trusted proxy, and then only as far as
// the chain of trusted proxies goes.
//
// A Proxies is not modified by the functions that take it and may be shared.
type Proxies struct {
	// Trusted lists the networks of the proxies whose forwarding headers are
	// believed. Empty: none, every forwarding header is ignored and the
	// client is the direct peer. IPv4-mapped IPv6 addresses are matched as
	// IPv4. Every prefix must be valid (netip.Prefix.IsValid: not the zero
	// Prefix an ignored parse error leaves, nor netip.PrefixFrom with too
	// many bits): KeyByClientIP and ClientIP panic on one that is not,
	// which would otherwise trust no proxy there, keying every client
	// behind it as the proxy, all in one quota.
	Trusted []netip.Prefix

	// Headers names the forwarding headers to read, in order of preference:
	// the first one present in the request decides, the others are ignored.
	// Default: X-Forwarded-For alone.
	//
	// X-Forwarded-For and Forwarded are read as lists of hops, walked from
	// the right (the hop closest to the server) past every trusted proxy; the
	// client is the first untrusted address. When every hop is trusted it is
	// the leftmost one; at a hop that is not an IP address
	// ("unknown", obfuscated node identifiers, garbage) the walk stops and
	// the client is the last trusted address reached, as it does after 32
	// hops (the rest of the header, which a client behind a trusted proxy
	// chooses, is never split). A Forwarded line with a quoted-string left
	// open is read from the right: the elements proxies appended to it are
	// hops, and the rest, which cannot be read, is not an IP address. Any
	// other header (X-Real-IP, CF-Connecting-IP, True-Client-IP) is read as
	// one address, from the last line of the header; if it is not an IP
	// address the client is the direct peer.
	//
	// A hop is an IP address, with or without a port, which is ignored. An
	// IPv6 address with a port must be bracketed, "[2001:db8::17]:4711"
	// (RFC 7239 section 6; quoted in Forwarded): unbracketed, a hop that is
	// an IPv6 address is that address, so "2001:db8::17:4711" is the address
	// 2001:db8::17:4711, not 2001:db8::17 with port 4711. A hop that is no
	// address but is one followed by ":" and a port can only mean that
	// address, and does: "2001:db8:1:2:a:b:c:d:4711" (nine groups),
	// "2001:db8::17:54321" (a port of five digits, as clients' ephemeral
	// ports are, is no 16-bit group), "2001:db8::17:_x". So behind a proxy
	// that writes ports without brackets a client keeps one key whatever
	// its port: the port is dropped, or, when it could be a group, lands in
	// the last 16 bits, which the /64 key ignores. Except, as no reading of
	// the hop can avoid, for a compressed address and a port of up to four
	// digits: when the "::" stands for zeros in the address's first 64 bits
	// (2001:db8::a:b:c:d), the groups after it move up one, into the /64
	// (2001:db8:0:a::/64), so the client has a second key, which changes
	// with its address; and a NAT64 or Teredo address (see KeyByIP) is not
	// keyed by the IPv4 address it carries (a NAT64 one by 64:ff9b::/64,
	// which all share; a Teredo one by a value that holds the port). Have
	// such a proxy bracket IPv6 addresses or leave the port out.
	//
	// Every name must be a header field name (see KeyByHeader): KeyByClientIP
	// and ClientIP panic on one that is not ("", "X-Forwarded-For " with a
	// stray space), which no request carries, so that the header would
	// never be read and every client behind the proxies keyed as a proxy.
	//
	// List only headers your proxies set or overwrite on every request. A
	// header that passes through them unchanged is chosen by the client, who
	// can then change its key, and so its quota, at will: for example, if
	// the proxy sets only X-Real-IP and Headers lists X-Forwarded-For first,
	// a client that sends its own X-Forwarded-For escapes the limit.
	Headers []string
}

// ClientIP returns the address of r's client as described on Proxies,
// unmapped (IPv4-mapped IPv6 addresses become IPv4) and without zone. It
// returns ErrNoAddress when r.RemoteAddr holds no IP address. A nil p trusts
// no proxy. It panics if p holds an invalid prefix or header name (see
// Trusted and Headers).
func (p *Proxies) ClientIP(r *http.Request) (netip.Addr, error) {
	if p == nil {
		return peerAddr(r)
	}
	q := p.normalize()
	return q.clientIP(r)
}

// normalize returns a copy of p with masked prefixes and canonical header
// names, defaulting Headers. It panics on an invalid prefix or header name.
func (p Proxies) normalize() Proxies {
	var q Proxies
	for i, pfx := range p.Trusted {
		if !pfx.IsValid() {
			panic(fmt.Sprintf("httplimit: Proxies.Trusted[%d] is not a valid prefix", i))
		}
		if pfx.Addr().Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		q.Trusted = append(q.Trusted, pfx.Masked())
	}
	hs := p.Headers
	if len(hs) == 0 {
		hs = []string{HeaderXForwardedFor}
	}
	for i, h := range hs {
		if !validHeaderName(h) {
			panic(fmt.Sprintf("httplimit: Proxies.Headers[%d], %q, is not a header field name", i, h))
		}
		q.Headers = append(q.Headers, http.CanonicalHeaderKey(h))
	}
	return q
}

// clientIP is ClientIP for a normalized p.
func (p *Proxies) clientIP(r *http.Request) (netip.Addr, error) {
	peer, err := peerAddr(r)
	if err != nil || !p.trusts(peer) {
		return peer, err
	}
	for _, h := range p.Headers {
		vs := r.Header.Values(h)
		if len(vs) == 0 {
			continue
		}
		switch h {
		case HeaderXForwardedFor:
			return p.walk(xffHops(vs), peer), nil
		case HeaderForwarded:
			return p.walk(forwardedHops(vs), peer), nil
		default:
			if a, ok := parseHop(vs[len(vs)-1]); ok {
				return a, nil
			}
			return peer, nil
		}
	}
	return peer, nil
}

// walk returns the client address of a list of hops received from the
// trusted peer, given right to left (nearest hop first): the rightmost
// untrusted hop; the last trusted address reached when it meets a hop that
// is not an IP address or runs out of hops.
func (p *Proxies) walk(hops []string, peer netip.Addr) netip.Addr {
	last := peer
	for _, hop := range hops {
		a, ok := parseHop(hop)
		if !ok {
			return last
		}
		if !p.trusts(a) {
			return a
		}
		last = a
	}
	return last
}

func (p *Proxies) trusts(a netip.Addr) bool {
	for _, pfx := range p.Trusted {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr returns the address of r's direct peer.
func peerAddr(r *http.Request) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return clean(ap.Addr()), nil
	}
	if a, err := netip.ParseAddr(r.RemoteAddr); err == nil {
		return clean(a), nil
	}
	return netip.Addr{}, ErrNoAddress
}

func clean(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// foldIP returns the key of an address: an IPv4 address as it is; an
// IPv6 address that stands for an IPv4 client (see embeddedIPv4) as that
// IPv4 address; any other IPv6 address as its /64 network
// ("2001:db8:1:2::/64").
func foldIP(a netip.Addr) string {
	if a.Is4() {
		return a.String()
	}
	if v4, ok := embeddedIPv4(a); ok {
		return v4.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

var (
	// nat64 is the NAT64 well-known prefix (RFC 6052): 64:ff9b::a.b.c.d is
	// the IPv4 host a.b.c.d, as a stateless translator in front of an
	// IPv6-only server (SIIT-DC, RFC 7755) shows IPv4 clients.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// teredo is the Teredo prefix (RFC 4380): 2001:0:S:F:P:C holds the
	// Teredo server's address S, flags F, and the client's public port P
	// and IPv4 address C, both inverted.
	teredo = netip.MustParsePrefix("2001::/32")
)

// embeddedIPv4 returns the IPv4 address of the client an IPv6 address
// stands for: the host in NAT64's well-known prefix, or a Teredo client's
// public address (behind which every client of one Teredo server shares
// one /64). It returns false for any other address.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:])), true
	case teredo.Contains(a):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}

// parseHop parses one hop of a forwarding header: an IP address, with or
// without a port (a number, or RFC 7239's obfuscated "_..." port), IPv6
// with or without brackets. An IPv6 address with a port should be
// bracketed (RFC 7239 section 6, RFC 3986); unbracketed, a hop that is an
// address is that address ("2001:db8::17:80" is 2001:db8::17:80, not
// 2001:db8::17 port 80), and one that is not, but is an address, ":" and a
// port ("2001:db8:1:2:3:4:5:6:80", "2001:db8::17:54321", whose last part is
// no 16-bit group, "2001:db8::17:_x"), is that address: it can be nothing
// else.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return clean(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return clean(ap.Addr()), true
	}
	if i := strings.LastIndexByte(s, ':'); i > 0 && (isPort(s[i+1:]) || isObfPort(s[i+1:])) {
		if host := s[:i]; host[0] == '[' {
			// "[2001:db8::17]:_x": a numeric port was ParseAddrPort's.
			s = host // parsed with its brackets below
		} else if a, err := netip.ParseAddr(host); err == nil {
			// "192.0.2.43:_hidden", and an unbracketed IPv6 address with a
			// port: s is no address, so the port cannot be part of one.
			return clean(a), true
		}
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return clean(a), true
		}
	}
	return netip.Addr{}, false
}

// isPort reports whether s is a port number, 0 to 65535, in decimal, as
// netip.ParseAddrPort reads it.
func isPort(s string) bool {
	_, err := strconv.ParseUint(s, 10, 16)
	return err == nil
}

// isObfPort reports whether s is an RFC 7239 obfuscated port: "_" and one
// or more letters, digits, ".", "_" or "-".
func isObfPort(s string) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// maxHops is the most hops of a forwarding header the walk reads, from the
// right; past them it stops as at a hop that is not an address. A client
// behind a trusted proxy chooses the rest of the header, up to the
// server's MaxHeaderBytes (1 MB by default): splitting all of it cost
// dozens of times its size in memory on every request.
const maxHops = 32

// xffHops returns the hops of X-Forwarded-For header lines right to left,
// skipping empty items: at most maxHops, then "" if there are more.
func xffHops(lines []string) []string {
	var hops []string
	for i := len(lines) - 1; i >= 0; i-- {
		for line := lines[i]; line != ""; {
			item := line
			if j := strings.LastIndexByte(line, ','); j >= 0 {
				item, line = line[j+1:], line[:j]
			} else {
				line = ""
			}
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			if len(hops) == maxHops {
				return append(hops, "")
			}
			hops = append(hops, item)
		}
	}
	return hops
}

// forwardedHops returns the for= value of the elements of RFC 7239
// Forwarded header lines, unquoted, right to left; "" for an element
// without one (which parseHop rejects, stopping the walk). It returns at
// most maxHops of them, then "" if there are more.
//
// A line with a quoted-string left open (or ending in a backslash inside
// one) is read from the right (see tailHops): the elements a proxy appended
// to it come out as they are, the unreadable rest as one "" hop. A client
// that sends `for=198.51.100.7;x="` would otherwise swallow the element a
// proxy appends to its line (`, for=203.0.113.9`) into its quote, and the
// walk would reach the address the client chose.
func forwardedHops(lines []string) []string {
	var hops []string
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		// Empty elements are no hops: only the others are counted.
		total := 0
		if !eachQuoted(line, ',', func(elem string) bool {
			if strings.TrimSpace(elem) != "" {
				total++
			}
			return true
		}) {
			return tailHops(hops, line) // the walk stops in this line
		}
		// The last non-empty elements only, one more than the walk reads.
		skip := max(0, total-(maxHops+1-len(hops)))
		var elems []string
		n := 0
		eachQuoted(line, ',', func(elem string) bool {
			if strings.TrimSpace(elem) == "" {
				return true
			}
			if n++; n > skip {
				elems = append(elems, elem)
			}
			return true
		})
		for j := len(elems) - 1; j >= 0; j-- {
			if len(hops) == maxHops {
				return append(hops, "")
			}
			hops = append(hops, forValue(elems[j])) // balanced: the line was
		}
		if skip > 0 {
			return append(hops, "")
		}
	}
	return hops
}

// forValue returns the for= value of a Forwarded element whose
// quoted-strings balance, unquoted; "" if it has none.
func forValue(elem string) string {
	hop := ""
	eachQuoted(elem, ';', func(pair string) bool {
		name, value, ok := strings.Cut(pair, "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
			hop = unquote(strings.TrimSpace(value))
			return false
		}
		return true
	})
	return hop
}

// tailHops appends to hops, up to maxHops of them, the for= values of the
// elements at the end of line, a Forwarded line whose quoted-strings do not
// balance, right to left, then "": the walk stops there.
//
// Read from the left, the line ends inside a quoted-string, so none of its
// elements can be told apart. Read from the right they can, as far as the
// elements the proxies appended to the line go: each proxy writes whole
// elements, whose quoted-strings are values after "=" and balance whichever
// way they are read (a quote preceded by an odd number of backslashes is
// escaped). The walk reaches what the client wrote further left only past
// trusted hops, as on a balanced line; the leftmost part of the line, and
// any element that does not balance read from the left too, is no hop.
// (A proxy that writes an escaped quote into the element it appends, which
// no for= value needs, can make the line balance from the left: it is then
// read from the left, and the client's quote swallows that element.)
func tailHops(hops []string, line string) []string {
	end, quoted := len(line), false
	for i := len(line) - 1; i >= 0; i-- {
		switch line[i] {
		case '"':
			k := 0 // backslashes before the quote
			for k < i && line[i-1-k] == '\\' {
				k++
			}
			if quoted && k%2 == 1 {
				i -= k // an escaped quote, and the backslashes before it
			} else {
				quoted = !quoted
			}
		case ',':
			if quoted {
				break
			}
			if elem := line[i+1 : end]; strings.TrimSpace(elem) != "" {
				if len(hops) == maxHops {
					return append(hops, "")
				}
				hop := ""
				if eachQuoted(elem, ';', func(string) bool { return true }) {
					hop = forValue(elem)
				}
				if hops = append(hops, hop); hop == "" {
					return hops
				}
			}
			end = i
		}
	}
	return append(hops, "") // the leftmost part, where the line went wrong
}

// splitQuoted splits s at every sep outside a quoted-string. ok is false if
// s ends inside a quoted-string (an unterminated quote, or a backslash
// escaping nothing).
func splitQuoted(s string, sep byte) (parts []string, ok bool) {
	if !eachQuoted(s, sep, func(string) bool { return true }) {
		return nil, false
	}
	eachQuoted(s, sep, func(part string) bool { parts = append(parts, part); return true })
	return parts, true
}

// eachQuoted calls f with each part of s split at every sep outside a
// quoted-string, left to right, until f returns false. It returns false if
// s ends inside a quoted-string (an unterminated quote, or a backslash
// escaping nothing); f is then not called for the last part.
func eachQuoted(s string, sep byte, f func(part string) bool) bool {
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			if i++; i == len(s) {
				return false // the backslash escapes nothing
			}
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			if !f(s[start:i]) {
				return true
			}
			start = i + 1
		}
	}
	if quoted {
		return false
	}
	f(s[start:])
	return true
}

// unquote returns the content of an RFC 7230 quoted-string, or s itself if
// it is not quoted.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	s = s[1 : len(s)-1]
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
