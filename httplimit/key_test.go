package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/httplimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func request(remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func TestKeyByIP(t *testing.T) {
	for _, tc := range []struct {
		name, remote, want string
	}{
		{"IPv4 as is", "192.0.2.1:1234", "192.0.2.1"},
		{"IPv4 without port", "192.0.2.1", "192.0.2.1"},
		{"IPv6 folded to /64", "[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", "2001:db8:1:2::/64"},
		{"another address in the same /64", "[2001:db8:1:2::1]:443", "2001:db8:1:2::/64"},
		{"next /64", "[2001:db8:1:3::1]:443", "2001:db8:1:3::/64"},
		{"IPv4-mapped IPv6 is IPv4", "[::ffff:192.0.2.1]:1", "192.0.2.1"},
		{"zone dropped", "[fe80::1%eth0]:1", "fe80::/64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := httplimit.KeyByIP(request(tc.remote))
			require.NoError(t, err)
			assert.Equal(t, tc.want, k)
		})
	}
	for _, remote := range []string{"", "@", "/run/app.sock", "example.com:80"} {
		_, err := httplimit.KeyByIP(request(remote))
		assert.ErrorIs(t, err, httplimit.ErrNoAddress, "RemoteAddr %q", remote)
	}
}

// An IPv6 address that stands for an IPv4 client is keyed by that IPv4
// address, as the client is over IPv4: every IPv4 client behind a NAT64
// translator, or every client of one Teredo server, would otherwise share
// the prefix's /64, and so one quota. IPv4 clients keep their own keys in
// every form.
func TestKeyByIPEmbeddedIPv4(t *testing.T) {
	for _, tc := range []struct {
		name, remote, want string
	}{
		{"NAT64", "[64:ff9b::c000:201]:1", "192.0.2.1"},
		{"another NAT64 client", "[64:ff9b::198.51.100.7]:1", "198.51.100.7"},
		{"Teredo, RFC 4380's example", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]:1", "192.0.2.45"},
		{"another client of the same Teredo server", "[2001:0:4136:e378:8000:63bf:3fff:fdd1]:1", "192.0.2.46"},
		{"the same Teredo client by another server, port and flags", "[2001:0:5ef5:79fd:0:1234:3fff:fdd2]:1", "192.0.2.45"},
		{"NAT64 local-use prefix: not recognised", "[64:ff9b:1::c000:201]:1", "64:ff9b:1::/64"},
		{"beside NAT64's /96", "[64:ff9b::1:c000:201]:1", "64:ff9b::/64"},
		{"beside Teredo's /32", "[2001:1::c000:201]:1", "2001:1::/64"},
		{"IPv4-mapped", "[::ffff:192.0.2.2]:1", "192.0.2.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := httplimit.KeyByIP(request(tc.remote))
			require.NoError(t, err)
			assert.Equal(t, tc.want, k)
		})
	}

	p := httplimit.Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	for _, tc := range []struct{ hop, addr, key string }{
		{"64:ff9b::198.51.100.7", "64:ff9b::c633:6407", "198.51.100.7"},
		{"[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"},
		{"::ffff:198.51.100.8", "198.51.100.8", "198.51.100.8"},
	} {
		r := request("10.0.0.1:1", "X-Forwarded-For", tc.hop)
		k, err := httplimit.KeyByClientIP(p)(r)
		require.NoError(t, err)
		assert.Equal(t, tc.key, k, "X-Forwarded-For %s", tc.hop)
		a, err := p.ClientIP(r)
		require.NoError(t, err)
		assert.Equal(t, netip.MustParseAddr(tc.addr), a, "ClientIP returns the address, not its key")
	}

	// Through the middleware, two IPv4 clients behind a NAT64 translator
	// have a quota each.
	clock := newClock(t0)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, openDB(t, clock)), 1), &httplimit.Options{Clock: clock.Now})
	require.NoError(t, err)
	h := m.Handler(&counting{})
	assert.Equal(t, http.StatusOK, do(h, "/", "[64:ff9b::c000:201]:1").Code)
	assert.Equal(t, http.StatusOK, do(h, "/", "[64:ff9b::c000:202]:1").Code, "another IPv4 client")
	assert.Equal(t, http.StatusTooManyRequests, do(h, "/", "192.0.2.1:1").Code, "the first client over IPv4")
}

func TestIPv6SameSlash64SharesQuota(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{Clock: clock.Now})
	require.NoError(t, err)
	h := m.Handler(&counting{})

	assert.Equal(t, http.StatusOK, do(h, "/", "[2001:db8:0:1::1]:1").Code)
	for _, addr := range []string{"[2001:db8:0:1:ffff::42]:1", "[2001:db8:0:1:a1b2:c3d4:e5f6:789]:2", "[2001:db8:0:1::]:3"} {
		assert.Equal(t, http.StatusTooManyRequests, do(h, "/", addr).Code, "%s: same /64, no new quota", addr)
	}
	// A client that holds the /48 2001:db8::/48 has a quota per /64.
	assert.Equal(t, http.StatusOK, do(h, "/", "[2001:db8:0:2::1]:1").Code, "another /64")
	assert.Equal(t, http.StatusOK, do(h, "/", "[2001:db8:0:ffff::1]:1").Code, "another /64")
}

var allHeaders = []string{httplimit.HeaderXForwardedFor, httplimit.HeaderForwarded, httplimit.HeaderXRealIP}

func TestSpoofedForwardingHeadersIgnored(t *testing.T) {
	spoof := []string{
		"X-Forwarded-For", "198.51.100.99",
		"Forwarded", "for=198.51.100.99",
		"X-Real-IP", "198.51.100.99",
	}
	trustingOthers := httplimit.Proxies{
		Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Headers: allHeaders,
	}
	for name, kf := range map[string]httplimit.KeyFunc{
		"KeyByIP":                         httplimit.KeyByIP,
		"KeyByClientIP without proxies":   httplimit.KeyByClientIP(httplimit.Proxies{Headers: allHeaders}),
		"KeyByClientIP, peer not trusted": httplimit.KeyByClientIP(trustingOthers),
	} {
		t.Run(name, func(t *testing.T) {
			k, err := kf(request("203.0.113.9:5555", spoof...))
			require.NoError(t, err)
			assert.Equal(t, "203.0.113.9", k)
		})
	}

	// Through the middleware: rotating spoofed headers does not buy quota.
	clock := newClock(t0)
	db := openDB(t, clock)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{
		Clock:   clock.Now,
		KeyFunc: httplimit.KeyByClientIP(trustingOthers),
	})
	require.NoError(t, err)
	h := m.Handler(&counting{})
	assert.Equal(t, http.StatusOK, do(h, "/", "203.0.113.9:1", "X-Forwarded-For", "1.1.1.1").Code)
	assert.Equal(t, http.StatusTooManyRequests, do(h, "/", "203.0.113.9:1", "X-Forwarded-For", "2.2.2.2").Code)
	assert.Equal(t, http.StatusTooManyRequests, do(h, "/", "203.0.113.9:1", "Forwarded", "for=3.3.3.3").Code)
	assert.Equal(t, http.StatusTooManyRequests, do(h, "/", "203.0.113.9:1", "X-Real-IP", "4.4.4.4").Code)
}

func TestTrustedProxies(t *testing.T) {
	trusted := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("2001:db8:ffff::/48"),
	}
	xff := httplimit.HeaderXForwardedFor
	for _, tc := range []struct {
		name    string
		headers []string // Proxies.Headers; nil for the default
		remote  string
		hdr     []string
		want    string // client address
	}{
		{"XFF one hop", nil, "10.0.0.1:1", []string{xff, "198.51.100.7"}, "198.51.100.7"},
		{"XFF walks past trusted hops, not to spoofed ones", nil, "10.0.0.1:1",
			[]string{xff, "1.1.1.1, 198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"XFF over several lines", nil, "10.0.0.1:1",
			[]string{xff, "1.1.1.1", xff, "198.51.100.7,10.0.0.2"}, "198.51.100.7"},
		{"XFF all trusted: leftmost", nil, "10.0.0.1:1", []string{xff, "10.0.0.3, 10.0.0.2"}, "10.0.0.3"},
		{"XFF stops at garbage: last trusted hop", nil, "10.0.0.1:1",
			[]string{xff, "198.51.100.7, garbage, 10.0.0.2"}, "10.0.0.2"},
		{"XFF garbage only: the peer", nil, "10.0.0.1:1", []string{xff, "unknown"}, "10.0.0.1"},
		{"XFF empty items skipped", nil, "10.0.0.1:1", []string{xff, "198.51.100.7,, ,"}, "198.51.100.7"},
		{"XFF hop with port", nil, "10.0.0.1:1", []string{xff, "198.51.100.7:5555"}, "198.51.100.7"},
		{"XFF IPv6 hop with brackets and port", nil, "10.0.0.1:1", []string{xff, "[2001:db8::1]:443"}, "2001:db8::1"},
		{"XFF IPv6 hop with brackets", nil, "10.0.0.1:1", []string{xff, "[2001:db8::1]"}, "2001:db8::1"},
		{"XFF IPv6 trusted proxy", nil, "[2001:db8:ffff::1]:1",
			[]string{xff, "198.51.100.7, 2001:db8:ffff:1::9"}, "198.51.100.7"},
		{"IPv4-mapped peer is trusted", nil, "[::ffff:10.0.0.1]:1", []string{xff, "198.51.100.7"}, "198.51.100.7"},
		{"untrusted peer", nil, "203.0.113.5:1", []string{xff, "198.51.100.7"}, "203.0.113.5"},
		{"no header: the peer", nil, "10.0.0.1:1", nil, "10.0.0.1"},
		{"Forwarded ignored by default", nil, "10.0.0.1:1", []string{"Forwarded", "for=198.51.100.7"}, "10.0.0.1"},
		{"X-Real-IP ignored by default", nil, "10.0.0.1:1", []string{"X-Real-IP", "198.51.100.7"}, "10.0.0.1"},

		{"Forwarded RFC 7239 example", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"`},
			"2001:db8:cafe::17"},
		{"Forwarded walks past trusted hops", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=1.1.1.1, for=192.0.2.60;proto=https, for="10.0.0.2:80"`}, "192.0.2.60"},
		{"Forwarded parameter names are case-insensitive", []string{"forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `proto=https;For=192.0.2.60`}, "192.0.2.60"},
		{"Forwarded quoted comma", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=192.0.2.60, for="_x,y";by=a, for=10.0.0.2`}, "10.0.0.2"},
		{"Forwarded unknown: the peer", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=unknown`}, "10.0.0.1"},
		{"Forwarded element without for", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=192.0.2.60, proto=https`}, "10.0.0.1"},
		// RFC 7239 section 6: a node's port may be obfuscated ("_" then
		// letters, digits, ".", "_", "-"); the node is still an address.
		{"Forwarded IPv4 with an obfuscated port", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for="198.51.100.7:_hidden"`}, "198.51.100.7"},
		{"Forwarded IPv6 with an obfuscated port", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for="[2001:db8:cafe::17]:_p.1-x"`}, "2001:db8:cafe::17"},
		// An IPv6 node with a port is bracketed (RFC 7239 section 6);
		// unbracketed, "2001:db8:cafe::17:_p" is no address, so it can only
		// be 2001:db8:cafe::17 and its port (see TestHopShapes).
		{"Forwarded unbracketed IPv6 with an obfuscated port", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=198.51.100.7, for="2001:db8:cafe::17:_p"`}, "2001:db8:cafe::17"},
		{"Forwarded walks past a trusted hop with an obfuscated port", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=192.0.2.60, for="10.0.0.2:_a"`}, "192.0.2.60"},
		{"Forwarded over several lines", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=1.1.1.1`, "Forwarded", `for=192.0.2.60`}, "192.0.2.60"},
		// A client's open quote must not swallow the element a proxy
		// appends to its line: the line is read from the right, as far as
		// the proxies' elements go; the client's part stops the walk.
		{"Forwarded open quote swallows nothing", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=198.51.100.7;x=", for=203.0.113.9`}, "203.0.113.9"},
		{"Forwarded open quote: the proxy's element read past a trusted one", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=198.51.100.7;x=", for=203.0.113.9, , for=10.0.0.2`}, "203.0.113.9"},
		{"Forwarded open quote: a backslash pair in the proxy's element", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `x=", for="[2001:db8:cafe::17]:4711";note="a,b\\"`}, "2001:db8:cafe::17"},
		// A proxy that writes an escaped quote into its element (no for=
		// value needs one) can make the line balance from the left: the
		// client's quote then swallows the element, and the walk stops at
		// the proxy.
		{"Forwarded open quote: an escaped quote in the proxy's element", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `x=", for="[2001:db8:cafe::17]:4711";note="a\"b"`}, "10.0.0.1"},
		{"Forwarded open quote: the client's part is no hop", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=198.51.100.7, for=10.0.0.9;x=", for=10.0.0.3, for=10.0.0.2`}, "10.0.0.3"},
		{"Forwarded open quote: an element open from the left too is no hop", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `x=", for=10.0.0.3;a="\", for=10.0.0.2`}, "10.0.0.2"},
		{"Forwarded trailing backslash in a quote", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=198.51.100.7;x="\`}, "10.0.0.1"},
		{"Forwarded open quote on another line", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=198.51.100.7;x="`, "Forwarded", `for=203.0.113.9`}, "203.0.113.9"},
		{"Forwarded open quote behind a trusted hop", []string{"Forwarded"}, "10.0.0.1:1",
			[]string{"Forwarded", `for=198.51.100.7;x="`, "Forwarded", `for=10.0.0.2`}, "10.0.0.2"},

		{"X-Real-IP", []string{"X-Real-IP"}, "10.0.0.1:1", []string{"X-Real-IP", "198.51.100.7"}, "198.51.100.7"},
		{"X-Real-IP last line", []string{"X-Real-IP"}, "10.0.0.1:1",
			[]string{"X-Real-IP", "1.1.1.1", "X-Real-IP", "198.51.100.7"}, "198.51.100.7"},
		{"X-Real-IP garbage: the peer", []string{"X-Real-IP"}, "10.0.0.1:1", []string{"X-Real-IP", "nope"}, "10.0.0.1"},
		{"first present header decides", []string{"X-Real-IP", xff}, "10.0.0.1:1",
			[]string{xff, "1.1.1.1", "X-Real-IP", "198.51.100.7"}, "198.51.100.7"},
		{"falls through to the next header", []string{"X-Real-IP", xff}, "10.0.0.1:1",
			[]string{xff, "198.51.100.7"}, "198.51.100.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := httplimit.Proxies{Trusted: trusted, Headers: tc.headers}
			r := request(tc.remote, tc.hdr...)
			got, err := p.ClientIP(r)
			require.NoError(t, err)
			assert.Equal(t, netip.MustParseAddr(tc.want), got)

			k, err := httplimit.KeyByClientIP(p)(r)
			require.NoError(t, err)
			want := tc.want
			if a := netip.MustParseAddr(tc.want); a.Is6() {
				want = netip.PrefixFrom(a, 64).Masked().String()
			}
			assert.Equal(t, want, k)
		})
	}
}

// TestHopShapes pins how one hop is read, in each header, for every way a
// proxy writes an address with or without a port. A hop that is no address
// stops the walk: the client is then the trusted peer, 10.0.0.1.
func TestHopShapes(t *testing.T) {
	const peer = "10.0.0.1"
	fwd, xff := httplimit.HeaderForwarded, httplimit.HeaderXForwardedFor
	for _, tc := range []struct {
		name, header, hop string
		want, key         string
	}{
		{"IPv4", fwd, `for=192.0.2.43`, "192.0.2.43", "192.0.2.43"},
		{"IPv4 with a port", fwd, `for=192.0.2.43:4711`, "192.0.2.43", "192.0.2.43"},
		{"IPv4 with a port, quoted", fwd, `for="192.0.2.43:4711"`, "192.0.2.43", "192.0.2.43"},
		{"IPv6 bracketed, quoted", fwd, `for="[2001:db8:1:2::17]"`, "2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"IPv6 bracketed, unquoted", fwd, `for=[2001:db8:1:2::17]`, "2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"IPv6 bracketed with a port, quoted", fwd, `for="[2001:db8:1:2::17]:4711"`, "2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"IPv6 bracketed with a port, unquoted", fwd, `for=[2001:db8:1:2::17]:4711`, "2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"IPv6 unbracketed, quoted", fwd, `for="2001:db8:1:2::17"`, "2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"IPv6 unbracketed, unquoted", fwd, `for=2001:db8:1:2::17`, "2001:db8:1:2::17", "2001:db8:1:2::/64"},
		// Unbracketed, an address is an address: RFC 7239 brackets a port,
		// so "2001:db8:1:2::17:4711" is 2001:db8:1:2::17:4711. A proxy that
		// meant port 4711 put it in the last 16 bits, which the /64 ignores.
		{"IPv6 unbracketed that could end in a port", fwd, `for="2001:db8:1:2::17:4711"`,
			"2001:db8:1:2::17:4711", "2001:db8:1:2::/64"},
		{"IPv6 unbracketed that could end in a port, unquoted", fwd, `for=2001:db8:1:2::17:4711`,
			"2001:db8:1:2::17:4711", "2001:db8:1:2::/64"},
		// ...unless the "::" stands for zeros of the first 64 bits: then
		// the groups after it move up one, into the /64, when a port is
		// appended. No reading fixes that: 2001:db8:0:a:b:c:d:4711 exists.
		{"IPv6 unbracketed compressed in its /64 that could end in a port", fwd, `for="2001:db8::a:b:c:d:4711"`,
			"2001:db8:0:a:b:c:d:4711", "2001:db8:0:a::/64"},
		// ...and a compressed NAT64 or Teredo address is no longer keyed by
		// the IPv4 address it carries (64:ff9b::c000:221 is 192.0.2.33).
		{"NAT64 unbracketed that could end in a port", fwd, `for="64:ff9b::c000:221:4711"`,
			"64:ff9b::c000:221:4711", "64:ff9b::/64"},
		{"Teredo compressed unbracketed that could end in a port", fwd, `for="2001:0:4136::63bf:3fff:fdd2:4711"`,
			"2001:0:4136:0:63bf:3fff:fdd2:4711", "2.45.184.238"},
		{"NAT64 unbracketed with a five-digit port", fwd, `for="64:ff9b::c000:221:54321"`,
			"64:ff9b::c000:221", "192.0.2.33"},
		// Not an address, but one followed by a port: nothing else it could
		// be, so the port is dropped.
		{"IPv6 unbracketed, eight groups and a port", fwd, `for="2001:db8:1:2:a:b:c:d:4711"`,
			"2001:db8:1:2:a:b:c:d", "2001:db8:1:2::/64"},
		// Ports of five digits, as clients' ephemeral ports are, are no
		// 16-bit groups: the hop is no address, so it is one with a port.
		{"IPv6 unbracketed with a five-digit port", fwd, `for="2001:db8:1:2::17:54321"`,
			"2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"IPv6 unbracketed compressed in its /64 with a five-digit port", fwd, `for="2001:db8::a:b:c:d:54321"`,
			"2001:db8::a:b:c:d", "2001:db8::/64"},
		{"IPv6 unbracketed with an obfuscated port", fwd, `for="2001:db8:1:2::17:_p"`,
			"2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"IPv4-mapped unbracketed with a port", fwd, `for="::ffff:192.0.2.43:4711"`, "192.0.2.43", "192.0.2.43"},
		{"Teredo unbracketed with a port", fwd, `for="2001:0:4136:e378:8000:63bf:3fff:fdd2:4711"`,
			"2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"},
		{"IPv6 unbracketed with a port beyond 65535", fwd, `for="2001:db8:1:2:a:b:c:d:65536"`, peer, peer},
		{"IPv6 unbracketed with an empty port", fwd, `for="2001:db8:1:2::17:"`, peer, peer},
		{"IPv6 unbracketed, ten groups", fwd, `for="2001:db8:1:2:a:b:c:d:1:80"`, peer, peer},

		{"XFF IPv4 with a port", xff, "192.0.2.43:4711", "192.0.2.43", "192.0.2.43"},
		{"XFF IPv6 bracketed with a port", xff, "[2001:db8:1:2::17]:4711", "2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"XFF IPv6 unbracketed", xff, "2001:db8:1:2::17", "2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"XFF IPv6 unbracketed that could end in a port", xff, "2001:db8:1:2::17:4711",
			"2001:db8:1:2::17:4711", "2001:db8:1:2::/64"},
		{"XFF IPv6 unbracketed, eight groups and a port", xff, "2001:db8:1:2:a:b:c:d:4711",
			"2001:db8:1:2:a:b:c:d", "2001:db8:1:2::/64"},
		{"XFF IPv6 unbracketed with a five-digit port", xff, "2001:db8:1:2::17:54321",
			"2001:db8:1:2::17", "2001:db8:1:2::/64"},
		{"XFF quotes are not X-Forwarded-For's", xff, `"[2001:db8:1:2::17]:4711"`, peer, peer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := httplimit.Proxies{
				Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
				Headers: []string{tc.header},
			}
			r := request(peer+":1", tc.header, tc.hop)
			got, err := p.ClientIP(r)
			require.NoError(t, err)
			assert.Equal(t, netip.MustParseAddr(tc.want), got)
			k, err := httplimit.KeyByClientIP(p)(r)
			require.NoError(t, err)
			assert.Equal(t, tc.key, k)
		})
	}
}

// A proxy that writes an IPv6 address and its port without brackets gives
// one client one key, whatever the port: the port either lands in the last
// 16 bits, which the /64 ignores, or is dropped. (Unless the address's "::"
// stands for zeros of its first 64 bits: see TestHopShapes.)
func TestUnbracketedPortKeepsOneQuota(t *testing.T) {
	for _, addr := range []string{"2001:db8:1:2::17", "2001:db8:1:2:a:b:c:d"} {
		for _, header := range []string{httplimit.HeaderXForwardedFor, httplimit.HeaderForwarded} {
			t.Run(header+" "+addr, func(t *testing.T) {
				clock := newClock(t0)
				m, err := httplimit.New(httplimit.Window(fixedMinute(t, openDB(t, clock)), 1), &httplimit.Options{
					Clock: clock.Now,
					KeyFunc: httplimit.KeyByClientIP(httplimit.Proxies{
						Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
						Headers: []string{header},
					}),
				})
				require.NoError(t, err)
				h := m.Handler(&counting{})
				hop := func(port string) string {
					if header == httplimit.HeaderForwarded {
						return `for="` + addr + ":" + port + `"`
					}
					return addr + ":" + port
				}
				assert.Equal(t, http.StatusOK, do(h, "/", "10.0.0.1:1", header, hop("54321")).Code)
				for _, port := range []string{"54322", "65535", "10000", "4711", "80", "1"} {
					assert.Equal(t, http.StatusTooManyRequests, do(h, "/", "10.0.0.1:1", header, hop(port)).Code,
						"port %s", port)
				}
				assert.Equal(t, http.StatusOK, do(h, "/", "10.0.0.1:1").Code,
					"the proxy's own quota: no hop was keyed as the proxy")
			})
		}
	}
}

func TestProxiesMappedPrefixAndNil(t *testing.T) {
	p := httplimit.Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}}
	got, err := p.ClientIP(request("10.1.2.3:1", "X-Forwarded-For", "198.51.100.7"))
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("198.51.100.7"), got, "an IPv4-mapped prefix matches IPv4 peers")

	// ::ffff:0:0/96, the whole IPv4-mapped range, is 0.0.0.0/0: every IPv4
	// peer.
	all := httplimit.Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("::ffff:0.0.0.0/96")}}
	got, err = all.ClientIP(request("192.0.2.1:1", "X-Forwarded-For", "198.51.100.7"))
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("198.51.100.7"), got, "the /96 of IPv4-mapped addresses matches every IPv4 peer")

	var none *httplimit.Proxies
	got, err = none.ClientIP(request("10.1.2.3:1", "X-Forwarded-For", "198.51.100.7"))
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("10.1.2.3"), got)

	_, err = p.ClientIP(request("@"))
	assert.ErrorIs(t, err, httplimit.ErrNoAddress)
}

// TestProxiesRefuseInvalidEntries: a Trusted prefix that is not valid (the
// zero Prefix an ignored ParsePrefix error leaves, PrefixFrom with too many
// bits) or a Headers name no header can have panics in KeyByClientIP and
// ClientIP. Both were dropped or never matched, silently: behind the proxy
// every client was keyed as the proxy, all of them in one quota.
func TestProxiesRefuseInvalidEntries(t *testing.T) {
	proxy := netip.MustParsePrefix("10.0.0.0/8")
	bad := map[string]httplimit.Proxies{
		"zero prefix":          {Trusted: []netip.Prefix{proxy, {}}},
		"prefix with 33 bits":  {Trusted: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("10.0.0.0"), 33)}},
		"empty header name":    {Trusted: []netip.Prefix{proxy}, Headers: []string{""}},
		"header with a space":  {Trusted: []netip.Prefix{proxy}, Headers: []string{"X-Forwarded-For "}},
		"header with a colon":  {Trusted: []netip.Prefix{proxy}, Headers: []string{"X-Real-IP", "Forwarded:"}},
		"header with a letter": {Trusted: []netip.Prefix{proxy}, Headers: []string{"X-Réal-IP"}},
	}
	r := request("10.0.0.1:1", "X-Forwarded-For", "198.51.100.7")
	for name, p := range bad {
		assert.Panics(t, func() { httplimit.KeyByClientIP(p) }, "KeyByClientIP: %s", name)
		assert.Panics(t, func() { _, _ = p.ClientIP(r) }, "ClientIP: %s", name)
	}
	assert.PanicsWithValue(t, `httplimit: Proxies.Headers[0], "X-Forwarded-For ", is not a header field name`,
		func() { httplimit.KeyByClientIP(bad["header with a space"]) })
	assert.PanicsWithValue(t, "httplimit: Proxies.Trusted[1] is not a valid prefix",
		func() { httplimit.KeyByClientIP(bad["zero prefix"]) })

	// Valid ones, names in any case, still work.
	good := httplimit.Proxies{Trusted: []netip.Prefix{proxy}, Headers: []string{"x-real-ip", "x-forwarded-for"}}
	k, err := httplimit.KeyByClientIP(good)(r)
	require.NoError(t, err)
	assert.Equal(t, "198.51.100.7", k)
	var zero httplimit.Proxies
	assert.NotPanics(t, func() { httplimit.KeyByClientIP(zero) })
}

func TestTrustedProxyThroughMiddleware(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{
		Clock: clock.Now,
		KeyFunc: httplimit.KeyByClientIP(httplimit.Proxies{
			Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		}),
	})
	require.NoError(t, err)
	h := m.Handler(&counting{})
	// Two clients behind one proxy have their own quotas...
	assert.Equal(t, http.StatusOK, do(h, "/", "10.0.0.1:1", "X-Forwarded-For", "198.51.100.1").Code)
	assert.Equal(t, http.StatusOK, do(h, "/", "10.0.0.1:1", "X-Forwarded-For", "198.51.100.2").Code)
	// ...and a client cannot escape by prepending a spoofed hop.
	assert.Equal(t, http.StatusTooManyRequests,
		do(h, "/", "10.0.0.1:1", "X-Forwarded-For", "5.5.5.5, 198.51.100.1").Code)
}

// Clients that send a Forwarded line with a quote left open, to which
// their proxy appends their address (nginx's "$http_forwarded, for=..."),
// keep a quota each: they were all keyed as the proxy, so that they shared
// one quota with each other and with the proxy's own requests.
func TestForwardedOpenQuoteKeepsClientsApart(t *testing.T) {
	clock := newClock(t0)
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, openDB(t, clock)), 1), &httplimit.Options{
		Clock: clock.Now,
		KeyFunc: httplimit.KeyByClientIP(httplimit.Proxies{
			Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
			Headers: []string{httplimit.HeaderForwarded},
		}),
	})
	require.NoError(t, err)
	h := m.Handler(&counting{})
	for _, client := range []string{"198.51.100.1", "198.51.100.2", `"[2001:db8:1::1]:4711"`} {
		fwd := `for=192.0.2.1;x="` + ", for=" + client
		assert.Equal(t, http.StatusOK, do(h, "/", "10.0.0.1:1", "Forwarded", fwd).Code, "client %s", client)
	}
	assert.Equal(t, http.StatusOK, do(h, "/", "10.0.0.1:1", "Forwarded", "for=10.0.0.1").Code, "the proxy's own quota")
	assert.Equal(t, http.StatusTooManyRequests,
		do(h, "/", "10.0.0.1:1", "Forwarded", `x="\", for=198.51.100.1`).Code, "the first client again")
}

// rawHeader keys by a header's raw value (KeyByHeader hashes it).
func rawHeader(name string) httplimit.KeyFunc {
	return func(r *http.Request) (string, error) { return r.Header.Get(name), nil }
}

func TestKeysUnambiguous(t *testing.T) {
	kf := httplimit.Keys(rawHeader("A"), rawHeader("B"))
	key := func(a, b string) string {
		t.Helper()
		k, err := kf(request("192.0.2.1:1", "A", a, "B", b))
		require.NoError(t, err)
		return k
	}
	assert.NotEqual(t, key("a|b", "c"), key("a", "b|c"))
	assert.NotEqual(t, key("ab", "c"), key("a", "bc"))
	assert.NotEqual(t, key("1:a", "1:b"), key("1:a1", ":b"))
	assert.NotEqual(t, key("3", ":abc"), key("3:abc", "x"))
	assert.Equal(t, key("x", "y"), key("x", "y"))

	k, err := httplimit.Keys(httplimit.KeyConst("login"), httplimit.KeyByIP)(request("192.0.2.1:1"))
	require.NoError(t, err)
	assert.Equal(t, "5:login9:192.0.2.1", k)

	_, err = httplimit.Keys(httplimit.KeyByIP, httplimit.KeyByRoute)(request("192.0.2.1:1"))
	assert.ErrorIs(t, err, httplimit.ErrNoRoute, "the first error is returned")

	// An empty component is no key, as an empty key is for a KeyFunc alone.
	empty := func(*http.Request) (string, error) { return "", nil }
	_, err = httplimit.Keys(httplimit.KeyConst("login"), empty)(request("192.0.2.1:1"))
	assert.ErrorIs(t, err, httplimit.ErrNoKey)

	assert.Panics(t, func() { httplimit.Keys() })
	assert.Panics(t, func() { httplimit.Keys(httplimit.KeyByIP, nil) })
	assert.Panics(t, func() { httplimit.KeyConst("") })
}

func FuzzKeysUnambiguous(f *testing.F) {
	f.Add("a|b", "c", "a", "b|c")
	f.Add("1:a", "", "", "1:a")
	f.Add("ab", "c", "a", "bc")
	kf := httplimit.Keys(rawHeader("A"), rawHeader("B"))
	key := func(t *testing.T, a, b string) (string, bool) {
		r := &http.Request{Header: http.Header{"A": {a}, "B": {b}}}
		k, err := kf(r)
		if a == "" || b == "" {
			if !errors.Is(err, httplimit.ErrNoKey) {
				t.Fatalf("(%q, %q): an empty component gave key %q, error %v; want ErrNoKey", a, b, k, err)
			}
			return "", false
		}
		if err != nil || k == "" {
			t.Fatalf("(%q, %q): key %q, error %v", a, b, k, err)
		}
		return k, true
	}
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		k1, ok1 := key(t, a, b)
		k2, ok2 := key(t, c, d)
		if ok1 && ok2 && (a == c && b == d) != (k1 == k2) {
			t.Fatalf("(%q, %q) and (%q, %q): keys %q and %q", a, b, c, d, k1, k2)
		}
	})
}

// The limiter stores a KeyByHeader key under the digest of the header
// value's digest: KeyByHeader returns "sha256:" and the value's digest,
// and the middleware digests every key that starts with "sha256:" once
// more. Hashing once would save about 180 ns a request, but would move
// every API key's window to a new key and so reset every quota on
// upgrade: the stored key must stay as it is.
func TestKeyByHeaderStoredKeyIsStable(t *testing.T) {
	clock := newClock(t0)
	w := fixedMinute(t, openDB(t, clock))
	m, err := httplimit.New(httplimit.Window(w, 10), &httplimit.Options{Clock: clock.Now, KeyFunc: httplimit.KeyByHeader("X-API-Key", nil)})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, do(m.Handler(&counting{}), "/", "192.0.2.1:1", "X-API-Key", "sk_live_abcdef").Code)
	// "sha256:" + base64url(SHA-256("sha256:" + base64url(SHA-256(value)))),
	// computed outside Go.
	n, err := w.Get(context.Background(), "sha256:1dSIIzJsmQTCL4VG0SNrX8fWsXnpio2Zim9xdY_fhC8")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the request is counted under the digest of the value's digest")
}

func TestKeyByHeader(t *testing.T) {
	withFallback := httplimit.KeyByHeader("x-api-key", httplimit.KeyByIP)
	k1, err := withFallback(request("192.0.2.1:1", "X-API-Key", "sk_live_abcdef"))
	require.NoError(t, err)
	assert.NotContains(t, k1, "sk_live", "the secret is not the key")
	assert.True(t, strings.HasPrefix(k1, "sha256:"), k1)

	k2, err := withFallback(request("192.0.2.2:1", "X-API-Key", "sk_live_abcdef"))
	require.NoError(t, err)
	assert.Equal(t, k1, k2, "the key follows the header, not the address")

	k3, err := withFallback(request("192.0.2.1:1", "X-API-Key", "sk_live_other"))
	require.NoError(t, err)
	assert.NotEqual(t, k1, k3)

	k, err := withFallback(request("192.0.2.1:1"))
	require.NoError(t, err)
	assert.Equal(t, "192.0.2.1", k, "missing header: the fallback")

	_, err = httplimit.KeyByHeader("X-API-Key", nil)(request("192.0.2.1:1"))
	assert.ErrorIs(t, err, httplimit.ErrNoKey)
	_, err = httplimit.KeyByHeader("X-API-Key", nil)(request("192.0.2.1:1", "X-API-Key", ""))
	assert.ErrorIs(t, err, httplimit.ErrNoKey, "an empty value is missing")
}

// TestKeyByHeaderRefusesAnInvalidName: a name no header can have (net/http's
// server refuses a request that carries one) panics, as KeyConst("") does,
// instead of keying every request by the fallback: with a stray space, a
// per-API-key quota silently became a per-address one, or every request
// was answered 400.
func TestKeyByHeaderRefusesAnInvalidName(t *testing.T) {
	for _, name := range []string{"", "X-API-Key ", " X-API-Key", "X API Key", "X-API-Key:", "X-Api-Kéy", "X-API-Key\n"} {
		assert.Panics(t, func() { httplimit.KeyByHeader(name, httplimit.KeyByIP) }, "%q", name)
	}
	for _, name := range []string{"x-api-key", "X-API-Key", "Host", "Authorization", "X_Tenant.ID", "!#$%&'*+-.^_`|~09az"} {
		assert.NotPanics(t, func() { httplimit.KeyByHeader(name, nil) }, "%q", name)
	}
	// The panic names the header, which is configuration, not a request's.
	assert.PanicsWithValue(t, `httplimit: KeyByHeader with "X-API-Key ", which is not a header field name`,
		func() { httplimit.KeyByHeader("X-API-Key ", nil) })
}

func TestMissingKeyIsRejectedNotCounted(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	onError := false
	opts := &httplimit.Options{
		Clock:   clock.Now,
		KeyFunc: httplimit.KeyByHeader("X-API-Key", nil),
		OnError: func(*http.Request, error) { onError = true },
	}
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), opts)
	require.NoError(t, err)
	next := &counting{}
	h := m.Handler(next)

	rec := do(h, "/", "192.0.2.1:1")
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Equal(t, "Bad Request\n", rec.Body.String())
	noRateHeaders(t, rec.Header())
	assert.Zero(t, m.Errors())
	assert.False(t, onError)
	assert.Zero(t, next.n.Load())

	assert.Equal(t, http.StatusOK, do(h, "/", "192.0.2.1:1", "X-API-Key", "k1").Code)
	assert.Equal(t, http.StatusTooManyRequests, do(h, "/", "192.0.2.9:1", "X-API-Key", "k1").Code)

	// A KeyFunc returning "" is a missing key too, and OnNoKey is replaceable.
	opts.KeyFunc = func(*http.Request) (string, error) { return "", nil }
	opts.OnNoKey = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	})
	m, err = httplimit.New(httplimit.Window(fixedMinute(t, db), 1), opts)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, do(m.Handler(next), "/", "192.0.2.1:1").Code)
	assert.Zero(t, m.Errors())
}

func TestKeyByRoute(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	var gotErr error
	m, err := httplimit.New(httplimit.Window(fixedMinute(t, db), 1), &httplimit.Options{
		Clock:   clock.Now,
		KeyFunc: httplimit.Keys(httplimit.KeyByRoute, httplimit.KeyByIP),
		OnError: func(_ *http.Request, err error) { gotErr = err },
	})
	require.NoError(t, err)
	next := &counting{}
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", m.Handler(next))
	mux.Handle("GET /users", m.Handler(next))

	assert.Equal(t, http.StatusOK, do(mux, "/items/1", "192.0.2.1:1").Code)
	assert.Equal(t, http.StatusTooManyRequests, do(mux, "/items/2", "192.0.2.1:1").Code, "one quota per pattern")
	assert.Equal(t, http.StatusOK, do(mux, "/users", "192.0.2.1:1").Code, "another pattern")
	assert.Equal(t, http.StatusOK, do(mux, "/items/1", "192.0.2.2:1").Code, "another client")
	assert.Zero(t, m.Errors())

	k, err := httplimit.KeyByRoute(&http.Request{Pattern: "GET /items/{id}"})
	require.NoError(t, err)
	assert.Equal(t, "GET /items/{id}", k)

	// Wrapping the mux instead: no pattern yet, a configuration error.
	rec := do(m.Handler(mux), "/users", "192.0.2.3:1")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.ErrorIs(t, gotErr, httplimit.ErrNoRoute)
	assert.EqualValues(t, 1, m.Errors())
}

// net/http's server moves the Host header to Request.Host: KeyByHeader("host")
// keys by it, through a real server, where Request.Header holds no Host.
func TestKeyByHeaderHostThroughAServer(t *testing.T) {
	kf := httplimit.KeyByHeader("host", nil)
	keys := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, err := kf(r)
		if err != nil {
			k = "error: " + err.Error()
		}
		keys <- k
	}))
	defer srv.Close()
	for _, host := range []string{"tenant-a.example", "tenant-b.example"} {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	a, b := <-keys, <-keys
	assert.True(t, strings.HasPrefix(a, "sha256:"), a)
	assert.True(t, strings.HasPrefix(b, "sha256:"), b)
	assert.NotEqual(t, a, b, "each host has its own key")
}
