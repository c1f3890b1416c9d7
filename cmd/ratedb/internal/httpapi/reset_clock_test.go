package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
)

// reset_in_second was the store's window end minus this host's wall clock,
// so a store whose clock differs (Redis's TIME on another host, or the
// embedded DB's clock after a step of the wall clock, which the DB does not
// follow) made it disagree with the decision: an Allow announced a reset
// hours away in a one-minute window, and a Deny's reset_in_second did not
// match its own Retry-After, which comes from the store's RetryAfter. The
// seed contract's reset_in_second is the time until the deciding window
// resets; httplimit's RateLimit-Reset already bounds it by the window and
// takes a denial's from RetryAfter (httplimit/headers.go).
func TestResetInSecondFollowsTheStoreClock(t *testing.T) {
	for _, skew := range []time.Duration{2 * time.Hour, -2 * time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			db, err := ratedb.Open("", &ratedb.Options{Clock: func() time.Time { return time.Now().Add(skew) }})
			require.NoError(t, err)
			t.Cleanup(func() { _ = db.Close() })
			h := serverOn(t, db, 1, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil))).h
			put := httptest.NewRequest(http.MethodPut, "/v1/rules/tiered", strings.NewReader(
				`{"client_id":"t","route":"*","tiers":[{"limit":1,"window":"1m"},{"limit":5,"window":"1h"}]}`))
			put.Header.Set("X-API-Key", "a")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, put)
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())

			type tier struct {
				Reset  int64  `json:"reset_in_second"`
				Window string `json:"window"`
			}
			type answer struct {
				Data struct {
					Status string `json:"status"`
					Reset  int64  `json:"reset_in_second"`
					Tiers  []tier `json:"tiers"`
				} `json:"data"`
			}
			check := func(client string) (answer, string) {
				req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"client_id":"`+client+`","route":"/r"}`))
				req.Header.Set("X-API-Key", "c")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				require.Equal(t, http.StatusOK, w.Code, w.Body.String())
				var a answer
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &a), w.Body.String())
				return a, w.Header().Get("Retry-After")
			}
			for _, client := range []string{"u", "t"} {
				a, _ := check(client)
				require.Equal(t, "Allow", a.Data.Status)
				assert.True(t, a.Data.Reset >= 1 && a.Data.Reset <= 60, "%s: an Allow in a 1m window resets in %d s", client, a.Data.Reset)
				for _, tr := range a.Data.Tiers {
					d, err := time.ParseDuration(tr.Window)
					require.NoError(t, err)
					assert.True(t, tr.Reset >= 1 && tr.Reset <= int64(d/time.Second), "%s: tier %s resets in %d s", client, tr.Window, tr.Reset)
				}
				a, retry := check(client)
				require.Equal(t, "Deny", a.Data.Status)
				assert.Equal(t, retry, strconv.FormatInt(a.Data.Reset, 10), "%s: a Deny's reset_in_second and Retry-After", client)
				if len(a.Data.Tiers) == 2 {
					assert.True(t, a.Data.Tiers[0].Reset >= 1 && a.Data.Tiers[0].Reset <= 60, "%s: denying tier 1m resets in %d s", client, a.Data.Tiers[0].Reset)
					assert.True(t, a.Data.Tiers[1].Reset >= 1 && a.Data.Tiers[1].Reset <= 3600, "%s: tier 1h resets in %d s", client, a.Data.Tiers[1].Reset)
				}
			}
		})
	}
}
