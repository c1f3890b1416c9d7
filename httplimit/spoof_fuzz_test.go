package httplimit_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/ratedb/ratedb/httplimit"
)

// Whatever a client puts in its own forwarding header, a trusted proxy
// that appends the client's real address, on a line of its own or on the
// client's, makes that address the client: a quote the client leaves open
// neither swallows it nor makes the proxy the client.
func FuzzProxyAppendedAddressWins(f *testing.F) {
	f.Add("9.9.9.9", `for=9.9.9.9;x="`, true, false)
	f.Add("", `for="[2001:db8::1]"`, false, true)
	f.Add("", `for=9.9.9.9;x="`, false, true)
	f.Add("", `for=9.9.9.9;x="\`, true, true)
	f.Add("", `x="a\"b, for=10.0.0.2`, true, true)
	f.Add("", `"\", for="`, false, true)
	f.Fuzz(func(t *testing.T, xff, fwd string, v6, sameLine bool) {
		real := netip.MustParseAddr("203.0.113.9")
		realFwd := "for=203.0.113.9"
		if v6 {
			real = netip.MustParseAddr("2001:db8:77::5")
			realFwd = `for="[2001:db8:77::5]:4711"`
		}
		p := httplimit.Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Headers: []string{"Forwarded"}}
		r := &http.Request{RemoteAddr: "10.0.0.1:1", Header: http.Header{}}
		if sameLine {
			r.Header["Forwarded"] = []string{fwd + ", " + realFwd}
		} else {
			r.Header["Forwarded"] = []string{fwd, realFwd}
		}
		a, err := p.ClientIP(r)
		if err != nil {
			t.Fatal(err)
		}
		if a != real {
			t.Fatalf("Forwarded %q: client %v", r.Header["Forwarded"], a)
		}
		p.Headers = nil
		r.Header = http.Header{"X-Forwarded-For": {xff + ", " + real.String()}}
		if a, _ := p.ClientIP(r); a != real {
			t.Fatalf("XFF %q: client %v", r.Header["X-Forwarded-For"], a)
		}
	})
}
