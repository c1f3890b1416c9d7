package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/httplimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plainWriter is a ResponseWriter with no optional interface at all (no
// Flush), like http.TimeoutHandler's writer or a minimal logging wrapper.
type plainWriter struct {
	h      http.Header
	status int
}

func (w *plainWriter) Header() http.Header { return w.h }
func (w *plainWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *plainWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}

// A handler that flushes through http.Flusher on a writer that cannot
// flush sends nothing; the status it writes next is the response's. Undo
// must see that status, as it does for ResponseController.Flush.
func TestFlusherOnNonFlushingWriterRecordsNoStatus(t *testing.T) {
	clock := newClock(t0)
	db := openDB(t, clock)
	w := fixedMinute(t, db)
	var undoStatus int
	m, err := httplimit.New(httplimit.Window(w, 10), &httplimit.Options{
		Clock: clock.Now,
		Undo:  func(_ *http.Request, status int) bool { undoStatus = status; return status < 400 },
	})
	require.NoError(t, err)
	h := m.Handler(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		if f, ok := rw.(http.Flusher); ok {
			f.Flush()
		}
		rw.WriteHeader(http.StatusUnauthorized)
	}))
	pw := &plainWriter{h: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, "/login", nil)
	r.RemoteAddr = "192.0.2.1:1"
	h.ServeHTTP(pw, r)
	require.Equal(t, http.StatusUnauthorized, pw.status, "the client got 401")
	assert.Equal(t, http.StatusUnauthorized, undoStatus, "Undo saw a status the client never got")
	n, err := w.Get(context.Background(), "192.0.2.1")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "a failed login was given back")
}

// New documents an error for "a Window with a nil limiter"; a typed nil
// limiter other than *ratedb.Window (a nil *redisstore.Window, say) passes
// New and panics on the first request.
func TestTypedNilLimiter(t *testing.T) {
	var lim *failing
	_, err := httplimit.New(httplimit.Window(lim, 5), nil)
	assert.Error(t, err)
}

// allocOfKey returns the key kf gives r and the bytes allocated meanwhile
// (the package's tests do not run in parallel).
func allocOfKey(t *testing.T, kf httplimit.KeyFunc, r *http.Request) (string, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	k, err := kf(r)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	return k, after.TotalAlloc - before.TotalAlloc
}

// A trusted proxy passes a long forwarding header: the client's own part,
// up to Go's default MaxHeaderBytes (1 MiB), then the proxy's hop. The key
// is found at the right end; splitting all of it first allocated 30 to 43
// times the header's size on every request.
func TestForwardingHeadersAllocationsBounded(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for name, tc := range map[string]struct {
		header, value string
		proxies       httplimit.Proxies
	}{
		"X-Forwarded-For": {"X-Forwarded-For", strings.Repeat("1,", 512<<10) + "203.0.113.9", httplimit.Proxies{Trusted: trusted}},
		"Forwarded":       {"Forwarded", strings.Repeat("for=1,", 170<<10) + "for=203.0.113.9", httplimit.Proxies{Trusted: trusted, Headers: []string{"Forwarded"}}},
		"Forwarded, a quote left open": {"Forwarded", `x="` + strings.Repeat("for=1,", 170<<10) + "for=203.0.113.9",
			httplimit.Proxies{Trusted: trusted, Headers: []string{"Forwarded"}}},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "10.0.0.1:1"
		r.Header.Set(tc.header, tc.value)
		k, alloc := allocOfKey(t, httplimit.KeyByClientIP(tc.proxies), r)
		assert.Equal(t, "203.0.113.9", k, name)
		t.Logf("%s: header %d bytes, allocated %d bytes", name, len(tc.value), alloc)
		assert.Less(t, alloc, uint64(len(tc.value)), "%s: allocation in proportion to a header the client writes", name)
	}
}

// Empty elements of a Forwarded line are no hops: ten trusted proxies'
// elements, each after empty ones (", , ,"), still lead to the client, far
// from the 32 hops the walk reads.
func TestForwardedEmptyElementsAreNoHops(t *testing.T) {
	p := httplimit.Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Headers: []string{"Forwarded"}}
	parts := []string{"for=203.0.113.7"}
	for i := range 10 {
		parts = append(parts, fmt.Sprintf(" , , , for=10.0.0.%d", i+1))
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.254:1"
	r.Header.Set("Forwarded", strings.Join(parts, ","))
	a, err := p.ClientIP(r)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("203.0.113.7"), a)
}

// The walk reads 32 hops, as Proxies.Headers says: a client behind 31
// trusted proxies is found; behind 32 the walk stops at the last of them,
// whatever lies further left.
func TestWalkReadsAtMost32Hops(t *testing.T) {
	for _, header := range []string{httplimit.HeaderXForwardedFor, httplimit.HeaderForwarded} {
		p := httplimit.Proxies{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Headers: []string{header}}
		for proxies, want := range map[int]string{31: "203.0.113.7", 32: "10.0.1.32"} {
			// Left to right: the client, then the proxies, 10.0.1.1 nearest.
			hops := []string{"203.0.113.7"}
			for i := proxies; i >= 1; i-- {
				hops = append(hops, fmt.Sprintf("10.0.1.%d", i))
			}
			if header == httplimit.HeaderForwarded {
				for i := range hops {
					hops[i] = "for=" + hops[i]
				}
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = "10.0.0.254:1"
			r.Header.Set(header, strings.Join(hops, ", "))
			a, err := p.ClientIP(r)
			require.NoError(t, err)
			assert.Equal(t, netip.MustParseAddr(want), a, "%s behind %d trusted proxies", header, proxies)
		}
	}
}

// fieldRater is a Rater whose Hit reads its fields, as redisstore's
// *Layered does.
type fieldRater struct{ limit int64 }

func (f *fieldRater) Hit(context.Context, string, int64) (ratedb.Result, error) {
	return ratedb.Result{Allowed: f.limit > 0}, nil
}

// New documents an error for "a nil r"; a typed nil Rater other than
// *ratedb.Layered (a nil *redisstore.Layered, say) passed New and panicked
// on the first request.
func TestTypedNilRater(t *testing.T) {
	var r *fieldRater
	_, err := httplimit.New(r, nil)
	assert.Error(t, err)
}
