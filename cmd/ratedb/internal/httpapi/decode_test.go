package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/httpapi"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeCheck(t *testing.T) {
	long := strings.Repeat("x", httpapi.MaxIDLen+1)
	cases := map[string]struct {
		body string
		cost int64
		ok   bool
	}{
		"minimal":       {`{"client_id":"u","route":"/r"}`, 1, true},
		"cost":          {`{"client_id":"u","route":"/r","cost":5}`, 5, true},
		"malformed":     {`{"client_id":"u",`, 0, false},
		"empty":         {``, 0, false},
		"not an object": {`[1]`, 0, false},
		"unknown field": {`{"client_id":"u","route":"/r","extra":1}`, 0, false},
		"no client":     {`{"route":"/r"}`, 0, false},
		"empty route":   {`{"client_id":"u","route":""}`, 0, false},
		"zero cost":     {`{"client_id":"u","route":"/r","cost":0}`, 0, false},
		"negative cost": {`{"client_id":"u","route":"/r","cost":-1}`, 0, false},
		"float cost":    {`{"client_id":"u","route":"/r","cost":1.5}`, 0, false},
		"huge cost":     {`{"client_id":"u","route":"/r","cost":1000001}`, 0, false},
		"long client":   {`{"client_id":"` + long + `","route":"/r"}`, 0, false},
		"trailing data": {`{"client_id":"u","route":"/r"} {}`, 0, false},
		"string cost":   {`{"client_id":"u","route":"/r","cost":"1"}`, 0, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			client, route, cost, err := httpapi.DecodeCheck([]byte(c.body))
			if !c.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "u", client)
			assert.Equal(t, "/r", route)
			assert.Equal(t, c.cost, cost)
		})
	}
}

func FuzzDecodeCheck(f *testing.F) {
	f.Add([]byte(`{"client_id":"user123","route":"/api/v1/order","cost":1}`))
	f.Add([]byte(`{"client_id":"u","route":"/r"}`))
	f.Add([]byte(`{"cost":-9}`))
	f.Add([]byte("{\"client_id\":\"\xff\",\"route\":\"/r\"}"))
	f.Add([]byte(`{"client_id":"\ud800","route":"/r","cost":2}`))
	f.Add([]byte(`{"client_id":"\ud83d\ude00","route":"\/r"}`))
	f.Add([]byte(`{"client_id":"alice","client_id":"bob","route":"/r"}`))
	f.Add([]byte(`{"CLIENT_ID":"alice","Route":"/r"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		client, route, cost, err := httpapi.DecodeCheck(body)
		if err != nil {
			if !errors.Is(err, httpapi.ErrBadRequest) {
				t.Fatalf("%v does not wrap errBadRequest", err)
			}
			return
		}
		if client == "" || route == "" || len(client) > httpapi.MaxIDLen || len(route) > httpapi.MaxIDLen {
			t.Fatalf("accepted ids of %d and %d bytes", len(client), len(route))
		}
		if cost < 1 || cost > httpapi.MaxCost {
			t.Fatalf("accepted cost %d", cost)
		}
		if !utf8.Valid(body) || strings.ContainsRune(client, utf8.RuneError) || strings.ContainsRune(route, utf8.RuneError) {
			t.Fatalf("accepted invalid UTF-8 or U+FFFD: %q", body)
		}
		// Member names are exact: a map keeps them as written.
		var members map[string]json.RawMessage
		if err := json.Unmarshal(body, &members); err != nil {
			t.Fatalf("accepted %q, which is not an object (%v)", body, err)
		}
		for name := range members {
			if name != "client_id" && name != "route" && name != "cost" {
				t.Fatalf("accepted the member %q", name)
			}
		}
	})
}

func FuzzDecodeRule(f *testing.F) {
	f.Add("premium", []byte(`{"client_id":"premium-*","route":"*","algorithm":"fixed","limit":5,"window":"60s"}`))
	f.Add("tiers", []byte(`{"client_id":"*","route":"*","tiers":[{"limit":1,"window":"1m"},{"limit":3,"window":"15m"}]}`))
	f.Add("dup", []byte(`{"client_id":"*","route":"*","tiers":[{"limit":1,"window":"1m","limit":9}]}`))
	f.Add("case", []byte(`{"client_id":"\ud800","route":"*","Limit":5,"window":"60s"}`))
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		r, err := httpapi.DecodeRule(name, body)
		if err != nil {
			if !errors.Is(err, rules.ErrInvalidRule) {
				t.Fatalf("%v does not wrap ErrInvalidRule", err)
			}
			return
		}
		if r.Name != name || len(r.Tiers) == 0 {
			t.Fatalf("rule %+v from %q", r, name)
		}
		if !utf8.Valid(body) || strings.ContainsRune(r.ClientID, utf8.RuneError) || strings.ContainsRune(r.Route, utf8.RuneError) {
			t.Fatalf("accepted invalid UTF-8 or U+FFFD: %q", body)
		}
	})
}

// FuzzDecodeCheckFast checks that the reflection-free decoder agrees with
// encoding/json whenever it accepts a body.
func FuzzDecodeCheckFast(f *testing.F) {
	f.Add([]byte(`{"client_id":"user123","route":"/api/v1/order","cost":1}`))
	f.Add([]byte(` { "route" : "/r" , "client_id":"u" } `))
	f.Add([]byte(`{"client_id":"u","route":"/r","cost":012}`))
	f.Add([]byte(`{"client_id":"u","client_id":"v","route":"/r"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, r, n, hasCost, ok := httpapi.DecodeCheckFast(body)
		if !ok {
			return
		}
		req, err := httpapi.DecodeCheckJSON(body)
		if err != nil {
			t.Fatalf("fast path accepted what encoding/json rejects (%v): %q", err, body)
		}
		if req.ClientID != c || req.Route != r || (req.Cost != nil) != hasCost || (hasCost && *req.Cost != n) {
			t.Fatalf("fast path disagrees on %q: %q %q %d %v", body, c, r, n, hasCost)
		}
	})
}

func TestDecodeCheckFastPath(t *testing.T) {
	for _, body := range []string{
		`{"client_id":"user123","route":"/api/v1/order","cost":1}`,
		"{\n \"route\":\"/r\",\t\"client_id\":\"u\"\r\n}",
	} {
		_, _, _, _, ok := httpapi.DecodeCheckFast([]byte(body))
		assert.True(t, ok, body)
	}
	for _, body := range []string{
		`{"client_id":"u\n","route":"/r"}`, `{"client_id":"é","route":"/r"}`, `{"client_id":"u","route":"/r","cost":1.0}`,
		`{"client_id":"u","route":"/r","cost":-1}`, `{"client_id":"u","route":"/r"}x`, `{"client_id":"u","route":"/r","x":1}`,
		`{"client_id":"u","client_id":"v","route":"/r"}`, `{"client_id":"u","route":"/r",}`,
	} {
		_, _, _, _, ok := httpapi.DecodeCheckFast([]byte(body))
		assert.False(t, ok, body)
	}
}

// The limits of a check body are inclusive.
func TestDecodeCheckInclusiveLimits(t *testing.T) {
	maxID := strings.Repeat("x", httpapi.MaxIDLen)
	for name, body := range map[string]string{
		"max cost":   fmt.Sprintf(`{"client_id":"u","route":"/r","cost":%d}`, httpapi.MaxCost),
		"max client": `{"client_id":"` + maxID + `","route":"/r"}`,
		"max route":  `{"client_id":"u","route":"` + maxID + `"}`,
	} {
		_, _, _, err := httpapi.DecodeCheck([]byte(body))
		assert.NoError(t, err, name)
	}
}
