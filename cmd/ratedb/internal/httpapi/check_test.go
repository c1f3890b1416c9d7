package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// fakeStore answers every Hit with res (or err).
type fakeStore struct {
	res ratedb.Result
	err error
}

type fakeLimiter struct{ s *fakeStore }

func (f fakeLimiter) Hit(context.Context, string, int64, int64) (ratedb.Result, error) {
	return f.s.res, f.s.err
}
func (fakeLimiter) Get(context.Context, string) (int64, error)           { return 0, nil }
func (fakeLimiter) ExpiresAt(context.Context, string) (time.Time, error) { return time.Time{}, nil }

type fakeLayered struct{ s *fakeStore }

func (f fakeLayered) Hit(context.Context, string, int64) (ratedb.Result, error) {
	return f.s.res, f.s.err
}
func (fakeLayered) Get(context.Context, string) ([]int64, error)           { return nil, nil }
func (fakeLayered) ExpiresAt(context.Context, string) ([]time.Time, error) { return nil, nil }

func (s *fakeStore) Window(ratedb.Algorithm, time.Duration) (core.WindowLimiter, error) {
	return fakeLimiter{s}, nil
}
func (s *fakeStore) Layered(ratedb.Algorithm, ...ratedb.Tier) (core.LayeredLimiter, error) {
	return fakeLayered{s}, nil
}

type checkAnswer struct {
	Data struct {
		Status   string `json:"status"`
		Limit    int64  `json:"limit"`
		Remain   int64  `json:"remain"`
		FailOpen bool   `json:"fail_open"`
		Tiers    []struct {
			Limit  int64 `json:"limit"`
			Remain int64 `json:"remain"`
		} `json:"tiers"`
	} `json:"data"`
}

// gapHandler serves the API under the default rule spec, deciding through
// store; its API key is "k".
func gapHandler(t *testing.T, spec rules.Spec, store *fakeStore, copts core.Options) http.Handler {
	t.Helper()
	spec.ClientID, spec.Route = "*", "*"
	def, err := rules.Build(rules.DefaultName, spec, true)
	require.NoError(t, err)
	rm, err := rules.NewManager(rules.FileStorage{Path: filepath.Join(t.TempDir(), "r.json")}, def)
	require.NoError(t, err)
	k, err := keys.Load(keys.Source{Env: "k"}, keys.Source{})
	require.NoError(t, err)
	return httpapi.New(httpapi.Options{Core: core.New(store, copts), Rules: rm, Keys: k,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// checkOnce answers one check under the default rule spec, deciding
// through store.
func checkOnce(t *testing.T, spec rules.Spec, store *fakeStore, copts core.Options) (*httptest.ResponseRecorder, checkAnswer) {
	t.Helper()
	h := gapHandler(t, spec, store, copts)
	req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(`{"client_id":"u","route":"/r"}`))
	req.Header.Set("X-API-Key", "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var a checkAnswer
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &a), w.Body.String())
	return w, a
}

func TestFailOpenAnswerReportsTheRuleLimit(t *testing.T) {
	limit := int64(7)
	store := &fakeStore{err: fmt.Errorf("%w: down", ratedb.ErrUnavailable)}
	w, a := checkOnce(t, rules.Spec{Limit: &limit, Window: "1m"}, store, core.Options{FailOpen: true})
	assert.Equal(t, "true", w.Header().Get("X-Ratedb-Fail-Open"))
	assert.Equal(t, "Allow", a.Data.Status)
	assert.True(t, a.Data.FailOpen)
	assert.EqualValues(t, 7, a.Data.Limit)
	assert.EqualValues(t, 7, a.Data.Remain, "nothing was counted")
}

func TestDenyRetryAfterAtLeastOneSecond(t *testing.T) {
	limit := int64(1)
	store := &fakeStore{res: ratedb.Result{Allowed: false, Limit: 1, Count: 1, RetryAfter: 0, Scale: time.Minute}}
	w, a := checkOnce(t, rules.Spec{Limit: &limit, Window: "1m"}, store, core.Options{})
	assert.Equal(t, "Deny", a.Data.Status)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
}

// A tier whose count is over its limit (the limit was lowered, which keeps
// the counts) reports remain 0, never negative.
func TestTierRemainNeverNegative(t *testing.T) {
	two, ten := int64(2), int64(10)
	end := time.Now().Add(time.Minute)
	tiers := []ratedb.TierResult{
		{Scale: time.Minute, Limit: 2, Count: 5, Remaining: 0, ResetAt: end},
		{Scale: time.Hour, Limit: 10, Count: 5, Remaining: 5, ResetAt: end},
	}
	store := &fakeStore{res: ratedb.Result{Allowed: false, Limit: 2, Count: 5, ResetAt: end, RetryAfter: time.Minute,
		Scale: time.Minute, Tiers: tiers}}
	_, a := checkOnce(t, rules.Spec{Tiers: []rules.TierSpec{{Limit: &two, Window: "1m"}, {Limit: &ten, Window: "1h"}}}, store, core.Options{})
	require.Len(t, a.Data.Tiers, 2)
	assert.EqualValues(t, 0, a.Data.Tiers[0].Remain)
	assert.EqualValues(t, 5, a.Data.Tiers[1].Remain)
}

// A check body of exactly MaxCheckBody bytes, its Content-Length given, is
// read and decided (413 is for bodies over it); one byte more is refused
// with 413.
func TestCheckBodyAtMaxSizeIsRead(t *testing.T) {
	limit := int64(5)
	store := &fakeStore{res: ratedb.Result{Allowed: true, Count: 1, Limit: 5, Remaining: 4,
		ResetAt: time.Now().Add(time.Minute), Scale: time.Minute}}
	h := gapHandler(t, rules.Spec{Limit: &limit, Window: "1m"}, store, core.Options{})
	check := `{"client_id":"u","route":"/r"}`
	for _, c := range []struct {
		size int
		want int
	}{{httpapi.MaxCheckBody, http.StatusOK}, {httpapi.MaxCheckBody + 1, http.StatusRequestEntityTooLarge}} {
		body := check + strings.Repeat(" ", c.size-len(check)) // trailing JSON whitespace
		req := httptest.NewRequest(http.MethodPost, "/v1/check", strings.NewReader(body))
		require.EqualValues(t, c.size, req.ContentLength)
		req.Header.Set("X-API-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		assert.Equal(t, c.want, w.Code, "body of %d bytes: %s", c.size, w.Body.String())
	}
}
