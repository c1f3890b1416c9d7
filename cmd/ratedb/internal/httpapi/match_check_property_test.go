package httpapi_test

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/stretchr/testify/require"
)

// idPieces are what the generator of ids builds from: ASCII, the
// characters JSON and URLs escape, valid multi-byte UTF-8, U+FFFD, and
// bytes that are not UTF-8 (a lone continuation byte, a cut sequence, a
// surrogate and an overlong form in UTF-8's shape).
var idPieces = []string{
	"a", "Z", "0", "/", "-", " ", "\x00", "\x1f", "\x7f", `"`, `\`, "%", "+", ";", "&", "=", "#", "?",
	"é", "€", "𝄞", "\u2028", "\uFFFD", "\xff", "\xfe", "\x80", "\xc3", "\xe2\x82", "\xed\xa0\x80", "\xc0\xaf",
}

// randomID is an id of 0 to about MaxIDLen+4 bytes from idPieces; one in
// four is padded with 'x' to lie within a few bytes of MaxIDLen.
func randomID(r *rand.Rand) string {
	var b strings.Builder
	for n := r.IntN(6); n > 0; n-- {
		b.WriteString(idPieces[r.IntN(len(idPieces))])
	}
	if r.IntN(4) == 0 {
		if pad := httpapi.MaxIDLen - 3 + r.IntN(6) - b.Len(); pad > 0 {
			b.WriteString(strings.Repeat("x", pad))
		}
	}
	return b.String()
}

// jsonBytes is s as a JSON string holding s's bytes as they are (encoding/json
// would turn a byte that is not UTF-8 into U+FFFD before the server saw it):
// only '"', '\' and control bytes are escaped.
func jsonBytes(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// GET /v1/rules/match answers (200) exactly the client_id and route a check
// accepts, and refuses (400) exactly those a check refuses: an id that no
// check can carry has no rule, and one a check can carry always has one.
// Both are driven by the same generator of ids, sent as raw bytes in the
// check's JSON and escaped in the match's query.
func TestMatchAcceptsExactlyTheIDsACheckAccepts(t *testing.T) {
	db, err := ratedb.Open("", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s := serverOn(t, db, rules.MaxLimit, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r := rand.New(rand.NewPCG(137, 1))
	accepted, refused := 0, 0
	for range 3000 {
		client, route := "u", "/r"
		if r.IntN(2) == 0 {
			client = randomID(r)
		} else {
			route = randomID(r)
		}
		checkCode, checkAnswer := s.do(t, http.MethodPost, "/v1/check", "c",
			`{"client_id":`+jsonBytes(client)+`,"route":`+jsonBytes(route)+`}`)
		require.Contains(t, []int{http.StatusOK, http.StatusBadRequest}, checkCode, checkAnswer)
		q := url.Values{"client_id": {client}, "route": {route}}
		matchCode, matchAnswer := s.do(t, http.MethodGet, "/v1/rules/match?"+q.Encode(), "a", "")
		require.Equal(t, checkCode, matchCode, "client_id %q, route %q: check answered %s, match %s", client, route, checkAnswer, matchAnswer)
		if checkCode == http.StatusOK {
			accepted++
		} else {
			refused++
		}
	}
	// The generator reaches both sides of the line.
	require.Greater(t, accepted, 300)
	require.Greater(t, refused, 300)
}
