package httplimit

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
)

func TestCeilSeconds(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		want int64
	}{
		{"negative", -time.Second, 0},
		{"zero", 0, 0},
		{"1 ns", 1, 1},
		{"1 ms", time.Millisecond, 1},
		{"1 s", time.Second, 1},
		{"1 s + 1 ns", time.Second + 1, 2},
		{"59.999 s", 59999 * time.Millisecond, 60},
		{"max", time.Duration(1<<63 - 1), 9223372037},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, ceilSeconds(tc.d)) })
	}
}

func TestResetAndRetryAfterAtLeastOne(t *testing.T) {
	now := time.Unix(1000, 0)
	assert.EqualValues(t, 1, resetSeconds(now, now), "a window that ends now")
	assert.EqualValues(t, 1, resetSeconds(now.Add(-time.Hour), now), "a clock ahead of the limiter's")
	assert.EqualValues(t, 2, resetSeconds(now.Add(1500*time.Millisecond), now))
	assert.EqualValues(t, 1, retryAfterSeconds(0))
	assert.EqualValues(t, 1, retryAfterSeconds(time.Millisecond))
	assert.EqualValues(t, 3600, retryAfterSeconds(time.Hour))
}

func TestUnixCeil(t *testing.T) {
	assert.EqualValues(t, 1000, unixCeil(time.Unix(1000, 0)))
	assert.EqualValues(t, 1001, unixCeil(time.Unix(1000, 1)))
	assert.EqualValues(t, 1001, unixCeil(time.UnixMilli(1000_999)))
	assert.EqualValues(t, 0, unixCeil(time.Unix(0, 0)))
	assert.EqualValues(t, 0, unixCeil(time.Unix(-1, 1)))
}

func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  ratedb.Result
		want string
	}{
		{"window", ratedb.Result{Limit: 100, Scale: time.Minute}, "100;w=60"},
		{"sub-second window rounds up", ratedb.Result{Limit: 5, Scale: 1500 * time.Millisecond}, "5;w=2"},
		{"no scale", ratedb.Result{Limit: 5}, ""},
		{"layered in tier order", ratedb.Result{Limit: 10, Scale: time.Hour, Tiers: []ratedb.TierResult{
			{Limit: 1, Scale: time.Minute}, {Limit: 10, Scale: time.Hour}, {Limit: 20, Scale: 24 * time.Hour},
		}}, "1;w=60, 10;w=3600, 20;w=86400"},
		{"layered tier without scale", ratedb.Result{Tiers: []ratedb.TierResult{{Limit: 1}}}, ""},
		// Listing the other tiers alone would announce fewer limits than
		// the ones enforced.
		{"layered, one tier of several without scale", ratedb.Result{Tiers: []ratedb.TierResult{
			{Limit: 1, Scale: time.Minute}, {Limit: 10}, {Limit: 20, Scale: 24 * time.Hour},
		}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, policy(&tc.res)) })
	}
}

func TestStoreKey(t *testing.T) {
	short := strings.Repeat("k", maxRawKey)
	assert.Equal(t, short, storeKey(short))
	long := short + "k"
	d := storeKey(long)
	assert.True(t, strings.HasPrefix(d, "sha256:"))
	assert.LessOrEqual(t, len(d), maxRawKey)
	assert.LessOrEqual(t, maxRawKey, ratedb.MaxKeyLen)
	assert.Equal(t, d, storeKey(long))
	assert.NotEqual(t, d, storeKey(long+"x"))
	// A short key that looks like a digest is digested too: it cannot
	// stand for the long key whose digest it copies.
	assert.NotEqual(t, d, storeKey(d))
	assert.True(t, strings.HasPrefix(storeKey(d), "sha256:"))
	assert.Equal(t, "sha256", storeKey("sha256"), "only the prefix with its colon")
}

func TestSplitQuotedAndUnquote(t *testing.T) {
	split := func(s string) []string {
		parts, ok := splitQuoted(s, ',')
		if !ok {
			return nil
		}
		return parts
	}
	assert.Equal(t, []string{`a`, ` "b,c"`, ` d`}, split(`a, "b,c", d`))
	assert.Equal(t, []string{`"a\",b"`, `c`}, split(`"a\",b",c`))
	assert.Equal(t, []string{``}, split(``))
	assert.Nil(t, split(`a, "b, c`), "an open quote")
	assert.Nil(t, split(`a, "b\`), "a backslash escaping nothing")
	assert.Equal(t, `[2001:db8::1]:80`, unquote(`"[2001:db8::1]:80"`))
	assert.Equal(t, `a"b`, unquote(`"a\"b"`))
	assert.Equal(t, `plain`, unquote(`plain`))
	assert.Equal(t, `"`, unquote(`"`))
}

// A Forwarded line whose quotes do not balance is read from the right: a
// quote after an odd number of backslashes is escaped, after an even number
// it is not; the element that reaches the left end is no hop, nor is one
// that does not balance read from the left.
func TestTailHops(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`x="`, []string{""}},
		{`x=", for=192.0.2.1`, []string{"192.0.2.1", ""}},
		{`x=", , for="[2001:db8::1]";n="a\"b\\", for=10.0.0.2`, []string{"10.0.0.2", "[2001:db8::1]", ""}},
		{`x=", for=192.0.2.1;a="\", for=10.0.0.2`, []string{"10.0.0.2", ""}},
		{`x=", proto=http, for=10.0.0.2`, []string{"10.0.0.2", ""}},
	} {
		assert.Equal(t, tc.want, tailHops(nil, tc.line), "%s", tc.line)
	}
	long := `x="` + strings.Repeat(", for=10.0.0.2", maxHops+5)
	hops := tailHops(nil, long)
	assert.Len(t, hops, maxHops+1)
	assert.Equal(t, "", hops[maxHops])
}

// FuzzClientIP feeds arbitrary forwarding headers to a trusted peer: the
// result is always a clean address, either the peer or one of the hops.
func FuzzClientIP(f *testing.F) {
	f.Add("198.51.100.7, 10.0.0.2", `for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"`, "198.51.100.7")
	f.Add(",,,", `for="\"`, "")
	f.Add("[::ffff:1.2.3.4]:80", `FOR=unknown;for=1.2.3.4`, "fe80::1%eth0")
	f.Fuzz(func(t *testing.T, xff, fwd, real string) {
		for _, headers := range [][]string{{"X-Forwarded-For"}, {"Forwarded"}, {"X-Real-IP"}} {
			p := Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Headers: headers}
			r := &http.Request{RemoteAddr: "10.0.0.1:1", Header: http.Header{}}
			r.Header.Set("X-Forwarded-For", xff)
			r.Header.Set("Forwarded", fwd)
			r.Header.Set("X-Real-IP", real)
			a, err := p.ClientIP(r)
			if err != nil {
				t.Fatal(err)
			}
			if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
				t.Fatalf("%s: unclean address %v", headers[0], a)
			}
			if !fromHeaders(a, xff, fwd, real) && a != netip.MustParseAddr("10.0.0.1") {
				t.Fatalf("%s: %v is neither the peer nor a hop", headers[0], a)
			}
		}
	})
}

// fromHeaders reports whether a is one of the hops of the headers.
func fromHeaders(a netip.Addr, xff, fwd, real string) bool {
	hops := append(xffHops([]string{xff}), forwardedHops([]string{fwd})...)
	for _, h := range append(hops, real) {
		if b, ok := parseHop(h); ok && b == a {
			return true
		}
	}
	return false
}
