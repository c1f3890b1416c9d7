package rules_test

import (
	"encoding/json"
	"errors"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/leaktest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func i64(v int64) *int64 { return &v }

func mustBuild(t *testing.T, name, client, route string, limit int64, window string) *rules.Rule {
	t.Helper()
	r, err := rules.Build(name, rules.Spec{ClientID: client, Route: route, Limit: i64(limit), Window: window}, false)
	require.NoError(t, err)
	return r
}

func defaultRule(t *testing.T) *rules.Rule {
	t.Helper()
	r, err := rules.Build(rules.DefaultName, rules.Spec{ClientID: "*", Route: "*", Limit: i64(100), Window: "60s"}, true)
	require.NoError(t, err)
	return r
}

func TestBuildReportsEveryProblem(t *testing.T) {
	_, err := rules.Build("bad name!", rules.Spec{
		Algorithm: "sliding",
		Tiers: []rules.TierSpec{
			{Limit: i64(-1), Window: "1m"},
			{Window: "soon"},
			{Limit: i64(3), Window: "1m"},
			{Limit: i64(3), Window: "1us"},
		},
	}, false)
	require.ErrorIs(t, err, rules.ErrInvalidRule)
	var ve *rules.ValidationError
	require.True(t, errors.As(err, &ve))
	assert.Len(t, ve.Problems, 9, "%q", ve.Problems)
	for _, want := range []string{"name", "client_id is empty", "route is empty", "algorithm", "tiers[0].limit", "tiers[1].limit is missing", "tiers[1].window", "tiers[2].window repeats", "tiers[3].window"} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestBuild(t *testing.T) {
	cases := map[string]struct {
		name string
		spec rules.Spec
		ok   bool
	}{
		"window":           {"a", rules.Spec{ClientID: "*", Route: "*", Limit: i64(5), Window: "60s"}, true},
		"zero limit":       {"a", rules.Spec{ClientID: "*", Route: "*", Limit: i64(0), Window: "1s"}, true},
		"tiers":            {"a", rules.Spec{ClientID: "*", Route: "*", Algorithm: "staggered", Tiers: []rules.TierSpec{{Limit: i64(1), Window: "1m"}, {Limit: i64(3), Window: "15m"}}}, true},
		"both":             {"a", rules.Spec{ClientID: "*", Route: "*", Limit: i64(5), Window: "1s", Tiers: []rules.TierSpec{{Limit: i64(1), Window: "1m"}}}, false},
		"no window":        {"a", rules.Spec{ClientID: "*", Route: "*", Limit: i64(5)}, false},
		"reserved":         {"default", rules.Spec{ClientID: "*", Route: "*", Limit: i64(5), Window: "1s"}, false},
		"the match route":  {"match", rules.Spec{ClientID: "*", Route: "*", Limit: i64(5), Window: "1s"}, false},
		"long pattern":     {"a", rules.Spec{ClientID: string(make([]byte, rules.MaxPatternLen+1)), Route: "*", Limit: i64(5), Window: "1s"}, false},
		"huge window":      {"a", rules.Spec{ClientID: "*", Route: "*", Limit: i64(5), Window: "9000h"}, false},
		"fractional ms":    {"a", rules.Spec{ClientID: "*", Route: "*", Limit: i64(5), Window: "1.5ms"}, false},
		"too many tiers":   {"a", rules.Spec{ClientID: "*", Route: "*", Tiers: make([]rules.TierSpec, 17)}, false},
		"huge limit":       {"a", rules.Spec{ClientID: "*", Route: "*", Limit: i64(1 << 41), Window: "1s"}, false},
		"per_key":          {"a:b.c-d_e", rules.Spec{ClientID: "x", Route: "y", Algorithm: "per_key", Limit: i64(5), Window: "1h"}, true},
		"unknown algoritm": {"a", rules.Spec{ClientID: "x", Route: "y", Algorithm: "FIXED", Limit: i64(5), Window: "1h"}, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := rules.Build(c.name, c.spec, false)
			if !c.ok {
				assert.ErrorIs(t, err, rules.ErrInvalidRule)
				return
			}
			require.NoError(t, err)
			// The spec round-trips.
			again, err := rules.Build(c.name, r.Spec(), false)
			require.NoError(t, err)
			assert.Equal(t, r.Spec(), again.Spec())
		})
	}
}

// TestMatchPrecedence is the README's matching table.
func TestMatchPrecedence(t *testing.T) {
	dir := t.TempDir()
	m, err := rules.NewManager(rules.FileStorage{Path: filepath.Join(dir, "r.json")}, defaultRule(t))
	require.NoError(t, err)
	_, err = m.Import([]*rules.Rule{
		mustBuild(t, "exact", "user123", "/api/v1/order", 1, "1m"),
		mustBuild(t, "premium", "premium-*", "*", 2, "1m"),
		mustBuild(t, "premium-bulk", "premium-*", "/api/v1/bulk/*", 3, "1m"),
		mustBuild(t, "bulk", "*", "/api/v1/bulk/*", 4, "1m"),
		mustBuild(t, "user-any", "user123", "*", 5, "1m"),
		mustBuild(t, "tie-b", "t*", "*", 6, "1m"),
		mustBuild(t, "tie-a", "*t", "*", 7, "1m"),
	})
	require.NoError(t, err)
	cases := []struct{ client, route, want string }{
		{"user123", "/api/v1/order", "exact"},
		{"user123", "/api/v1/bulk/x", "user-any"},       // 7 literals in client_id beat bulk's 0
		{"premium-9", "/api/v1/bulk/x", "premium-bulk"}, // same client_id literals, more in route
		{"premium-9", "/api/v1/order", "premium"},
		{"basic-1", "/api/v1/bulk/x", "bulk"},
		{"tt", "/x", "tie-a"}, // same literals everywhere: by name
		{"basic-1", "/api/v1/order", "default"},
	}
	for _, c := range cases {
		r, reason := m.Current().Match(c.client, c.route)
		assert.Equal(t, c.want, r.Name, "%s %s", c.client, c.route)
		assert.NotEmpty(t, reason)
	}
}

func TestManagerPersistsAndGenerations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	m, err := rules.NewManager(rules.FileStorage{Path: path}, defaultRule(t))
	require.NoError(t, err)
	created, err := m.Put(mustBuild(t, "a", "x", "*", 5, "1m"))
	require.NoError(t, err)
	assert.True(t, created)
	k0 := mustGet(t, m, "a").Key("c", "r")
	created, err = m.Put(mustBuild(t, "a", "x", "*", 9, "1m"))
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, k0, mustGet(t, m, "a").Key("c", "r"), "a limit-only change keeps the counted key")
	gen0 := mustGet(t, m, "a").Generation
	_, err = m.Put(mustBuild(t, "a", "x", "*", 9, "2m"))
	require.NoError(t, err)
	assert.NotEqual(t, k0, mustGet(t, m, "a").Key("c", "r"), "a window change starts new windows")
	_, err = m.Put(mustBuild(t, "b", "y", "*", 1, "1s"))
	require.NoError(t, err)
	require.NoError(t, m.Delete("b"))
	assert.ErrorIs(t, m.Delete("b"), rules.ErrNotFound)

	// A new manager on the same file sees the same rules.
	m2, err := rules.NewManager(rules.FileStorage{Path: path}, defaultRule(t))
	require.NoError(t, err)
	got := mustGet(t, m2, "a")
	assert.Equal(t, int64(9), got.Tiers[0].Limit)
	assert.Equal(t, 2*time.Minute, got.Tiers[0].Scale)
	assert.Equal(t, gen0+1, got.Generation)
	_, ok := m2.Current().Get("b")
	assert.False(t, ok)
	assert.Len(t, m2.Current().Rules(), 1)
}

func mustGet(t *testing.T, m *rules.Manager, name string) *rules.Rule {
	t.Helper()
	r, ok := m.Current().Get(name)
	require.True(t, ok, name)
	return r
}

func TestKeysAreDistinct(t *testing.T) {
	r := mustBuild(t, "a", "*", "*", 1, "1m")
	assert.NotEqual(t, r.Key("a|1", "x"), r.Key("a", "1|x"))
	assert.NotEqual(t, r.Key("ab", "c"), r.Key("a", "bc"))
}

func TestParseFile(t *testing.T) {
	rs, err := rules.ParseFile([]byte(`
rules:
  - name: bulk
    client_id: "*"
    route: "api:bulk:*"
    limit: 1000
    window: 1m
  - name: tiered
    client_id: "premium-*"
    route: "*"
    tiers:
      - {limit: 1, window: 1m}
      - {limit: 10, window: 1h}
`))
	require.NoError(t, err)
	require.Len(t, rs, 2)
	assert.Equal(t, ratedb.FixedWindow, rs[0].Algorithm)
	assert.True(t, rs[1].Layered)

	js, err := rules.ParseFile([]byte(`{"rules":[{"name":"j","client_id":"*","route":"/x","limit":3,"window":"10s"}]}`))
	require.NoError(t, err)
	assert.Equal(t, 10*time.Second, js[0].Tiers[0].Scale)

	_, err = rules.ParseFile([]byte(`
rules:
  - {name: a, client_id: "*", route: "*", limit: 1}
  - {name: a, client_id: "*", route: "*", limit: 1, window: 1s}
  - {name: a, client_id: "*", route: "*", limit: 1, window: 1s}
  - {name: c, client_id: "*", route: "*", limit: 1, window: 1s, colour: red}
`))
	require.ErrorIs(t, err, rules.ErrInvalidRule)
	// The unknown field is placed by its line and not named: the file
	// could be a keys file given by mistake.
	assert.Contains(t, err.Error(), "line 6: unknown field in rules.Spec (a rule's fields are name, client_id, route, algorithm, limit, window and tiers)")
	assert.NotContains(t, err.Error(), "colour")

	// A second YAML document is not silently ignored, invalid rules and all.
	_, err = rules.ParseFile([]byte(`
rules:
  - {name: a, client_id: "*", route: "*", limit: 1, window: 1s}
---
rules:
  - {name: b, client_id: "*", route: "*", limit: -1, window: 1s}
`))
	require.ErrorIs(t, err, rules.ErrInvalidRule)
	assert.Contains(t, err.Error(), "more than one YAML document")
	// An unknown field, an invalid rule and a second document: all three
	// reported at once.
	_, err = rules.ParseFile([]byte("rules:\n  - {name: a, client_id: \"*\", route: x, limit: 1, window: 1m, colour: red}\n  - {name: b, client_id: \"*\", route: y, limit: -1, window: 1m}\n---\nrules: []\n"))
	require.ErrorIs(t, err, rules.ErrInvalidRule)
	assert.Contains(t, err.Error(), "line 2: unknown field in rules.Spec")
	assert.Contains(t, err.Error(), "rules[1] (b): limit -1")
	assert.Contains(t, err.Error(), "more than one YAML document")
	// A keys file given by mistake, with a comment line between its keys,
	// holds no second document: what follows the comment fails to parse,
	// and that is said with its line, quoting no key.
	_, err = rules.ParseFile([]byte("k3y-one\n# prod\nk3y-two\n"))
	require.ErrorIs(t, err, rules.ErrInvalidRule)
	assert.NotContains(t, err.Error(), "more than one YAML document")
	assert.Contains(t, err.Error(), "not a rule file: line 2: did not find expected <document start>")
	assert.NotContains(t, err.Error(), "k3y")

	// U+FFFD, which no check request can carry (the check API refuses it),
	// makes a pattern that could never match: refused, as the rules API
	// refuses it.
	_, err = rules.ParseFile([]byte("rules:\n  - {name: f, client_id: \"a\\uFFFDb\", route: \"*\", limit: 1, window: 1s}\n"))
	require.ErrorIs(t, err, rules.ErrInvalidRule)
	assert.Contains(t, err.Error(), "client_id holds U+FFFD")
	_, err = rules.ParseFile([]byte("rules:\n  - {name: f, client_id: \"*\", route: \"/\xef\xbf\xbd\", limit: 1, window: 1s}\n"))
	require.ErrorIs(t, err, rules.ErrInvalidRule)
	assert.Contains(t, err.Error(), "route holds U+FFFD")
	empty, err := rules.ParseFile(nil)
	require.NoError(t, err, "an empty file holds no rules")
	assert.Empty(t, empty)
}

func FuzzBuild(f *testing.F) {
	f.Add("a", []byte(`{"client_id":"premium-*","route":"*","algorithm":"fixed","limit":5,"window":"60s"}`))
	f.Add("t", []byte(`{"client_id":"*","route":"*","tiers":[{"limit":1,"window":"1m"},{"limit":3,"window":"15m"}]}`))
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		var s rules.Spec
		if json.Unmarshal(body, &s) != nil {
			return
		}
		r, err := rules.Build(name, s, false)
		if err != nil {
			if !errors.Is(err, rules.ErrInvalidRule) {
				t.Fatalf("error %v does not wrap ErrInvalidRule", err)
			}
			return
		}
		if _, err := rules.Build(name, r.Spec(), false); err != nil {
			t.Fatalf("a valid rule's spec does not rebuild: %v", err)
		}
	})
}

func TestReloadSeesAnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	a, err := rules.NewManager(rules.FileStorage{Path: path}, defaultRule(t))
	require.NoError(t, err)
	b, err := rules.NewManager(rules.FileStorage{Path: path}, defaultRule(t))
	require.NoError(t, err)
	_, err = a.Put(mustBuild(t, "x", "c", "*", 3, "1m"))
	require.NoError(t, err)
	_, ok := b.Current().Get("x")
	assert.False(t, ok)
	require.NoError(t, b.Reload())
	assert.Equal(t, int64(3), mustGet(t, b, "x").Tiers[0].Limit)

	// A broken store keeps the current rules.
	require.NoError(t, os.WriteFile(path, []byte("{"), 0o600))
	assert.Error(t, b.Reload())
	mustGet(t, b, "x")
}

// A stored rule this version refuses (written by another version, or by
// hand) stops a Manager from starting, with an error naming it, but does not
// stop the changes of a Manager already running: they keep it as stored, and
// a PUT or a DELETE of its name repairs it.
func TestInvalidStoredRuleCanBeRepaired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	store := rules.FileStorage{Path: path}
	m, err := rules.NewManager(store, defaultRule(t))
	require.NoError(t, err)
	_, err = m.Put(mustBuild(t, "good", "c", "*", 3, "1m"))
	require.NoError(t, err)

	bad := rules.Stored{Spec: rules.Spec{Name: "bad", ClientID: "c", Route: "*", Limit: i64(-1), Window: "1m"}, Generation: 4}
	other := rules.Stored{Spec: rules.Spec{Name: "other", ClientID: "d", Route: "*", Limit: i64(5), Window: "fortnight"}, Generation: 1}
	require.NoError(t, store.Update(func(cur []rules.Stored) ([]rules.Stored, error) {
		return append(cur, bad, other), nil
	}))

	_, err = rules.NewManager(store, defaultRule(t))
	require.ErrorIs(t, err, rules.ErrInvalidRule)
	assert.Contains(t, err.Error(), `"bad"`)
	assert.Error(t, m.Reload(), "a reload keeps the rules it serves")
	mustGet(t, m, "good")

	// Another change keeps both invalid rules as they were.
	_, err = m.Put(mustBuild(t, "new", "e", "*", 7, "1m"))
	require.NoError(t, err)
	stored, err := store.Load()
	require.NoError(t, err)
	require.Len(t, stored, 4)
	assert.Contains(t, stored, bad)
	assert.Contains(t, stored, other)
	_, ok := m.Current().Get("bad")
	assert.False(t, ok, "an invalid rule is not served")

	// A PUT replaces one: not a creation, and its windows start anew.
	created, err := m.Put(mustBuild(t, "bad", "c", "*", 2, "1m"))
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, int64(5), mustGet(t, m, "bad").Generation)
	// A DELETE removes the other.
	require.NoError(t, m.Delete("other"))
	require.ErrorIs(t, m.Delete("other"), rules.ErrNotFound)

	fresh, err := rules.NewManager(store, defaultRule(t))
	require.NoError(t, err, "the repaired storage loads")
	assert.Len(t, fresh.Current().Rules(), 3)
}

// A stored rule another instance (or a hand edit) made unbuildable for
// this version does not freeze the rule set: a reload applies every other
// change and keeps serving the version of that rule it had, and so do this
// instance's own changes, so instances sharing a storage converge.
func TestReloadAppliesChangesAroundAnInvalidRule(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	store := rules.FileStorage{Path: path}
	m, err := rules.NewManager(store, defaultRule(t))
	require.NoError(t, err)
	_, err = m.Put(mustBuild(t, "good", "c", "*", 3, "1m"))
	require.NoError(t, err)

	// Another instance stores "late", and "good" turns into a spec this
	// version refuses.
	late := mustBuild(t, "late", "d", "*", 4, "1m")
	require.NoError(t, store.Update(func(cur []rules.Stored) ([]rules.Stored, error) {
		for i := range cur {
			if cur[i].Spec.Name == "good" {
				cur[i].Spec.Window = "fortnight"
			}
		}
		return append(cur, rules.Stored{Spec: late.Spec()}), nil
	}))
	err = m.Reload()
	require.ErrorIs(t, err, rules.ErrInvalidRule)
	assert.Contains(t, err.Error(), `"good"`)
	assert.Equal(t, int64(4), mustGet(t, m, "late").Tiers[0].Limit, "the other change applies")
	assert.Equal(t, int64(3), mustGet(t, m, "good").Tiers[0].Limit, "the version it had stays served")

	// A change of another rule keeps serving it too, and stores it as it was.
	_, err = m.Put(mustBuild(t, "new", "e", "*", 7, "1m"))
	require.NoError(t, err)
	mustGet(t, m, "good")
	mustGet(t, m, "new")
	stored, err := store.Load()
	require.NoError(t, err)
	var windows []string
	for _, s := range stored {
		if s.Spec.Name == "good" {
			windows = append(windows, s.Spec.Window)
		}
	}
	assert.Equal(t, []string{"fortnight"}, windows, "stored as it was, once")

	// Deleting it stops serving it.
	require.NoError(t, m.Delete("good"))
	_, ok := m.Current().Get("good")
	assert.False(t, ok)
	require.NoError(t, m.Reload())
}

// silentStorage's Update returns without calling f or saving: a Storage
// broken that way must not empty the served rules.
type silentStorage struct{ rules.FileStorage }

func (silentStorage) Update(func([]rules.Stored) ([]rules.Stored, error)) error { return nil }

// A change whose Storage.Update saved nothing (never called the edit) is an
// error, and the served rules stay: serving an empty set made every check
// panic.
func TestChangeTheStorageDidNotMakeKeepsTheRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	m, err := rules.NewManager(rules.FileStorage{Path: path}, defaultRule(t))
	require.NoError(t, err)
	_, err = m.Put(mustBuild(t, "a", "x", "*", 5, "1m"))
	require.NoError(t, err)
	broken, err := rules.NewManager(silentStorage{rules.FileStorage{Path: path}}, defaultRule(t))
	require.NoError(t, err)
	_, err = broken.Put(mustBuild(t, "b", "y", "*", 5, "1m"))
	require.Error(t, err)
	require.NotNil(t, broken.Current(), "a set is served")
	mustGet(t, broken, "a")
	r, _ := broken.Current().Match("nobody", "/r")
	assert.Equal(t, rules.DefaultName, r.Name)
}

// FuzzParseFile feeds ParseFile arbitrary rule files (--rules): it never
// panics; it refuses with a *ValidationError wrapping ErrInvalidRule; its
// message never holds a line of the file that looks like an API key (a
// keys file given by mistake, see ParseFile), unless that line is a value
// ParseFile quotes on purpose (a name, a window, an algorithm); and the
// rules of a file it accepts, written back as a rule file, parse to the
// same rules.
func FuzzParseFile(f *testing.F) {
	for _, s := range []string{
		"rules:\n  - name: bulk\n    client_id: \"*\"\n    route: \"api:bulk:*\"\n    limit: 1000\n    window: 1m\n" +
			"  - name: tiered\n    client_id: \"premium-*\"\n    route: \"*\"\n    tiers:\n      - {limit: 1, window: 1m}\n      - {limit: 10, window: 1h}\n",
		`{"rules":[{"name":"j","client_id":"*","route":"/x","limit":3,"window":"10s"}]}`,
		"rules:\n  - {name: a, client_id: \"*\", route: x, limit: 1, window: 1m, colour: red}\n  - {name: b, client_id: \"*\", route: y, limit: -1, window: 1m}\n---\nrules: []\n",
		"rules:\n  - {name: f, client_id: \"a\\uFFFDb\", route: \"*\", limit: 1, window: 1s}\n",
		"rules:\n  - {name: h, client_id: \"*\", route: \"*\", limit: 0.5, window: 1s, algorithm: per_key}\n",
		"rules:\n  - name: k\n    client_id: \"*\"\n    route: \"*\"\n    limit: 1\n    window: sk_live_4eC39HqLyjWDarjtT1zdp7dc\n",
		"sk_live_4eC39HqLyjWDarjtT1zdp7dc\ndev-0123456789abcdef0123456789abcdef\n",
		"rules:\n  4eC39HqLyjWDarjtT1zdp7dc: 1\n",
		"rules:\n  - &4eC39HqLyjWDarjtT1zdp7dc {name: a}\n",
		"rules:\n  - 4eC39HqLyjWDarjtT1zdp7dc\n",
		"rules:\n  - {name: a, client_id: \"*\", route: \"*\", limit: 4eC39HqLyjWDarjtT1zdp7dc, window: 1s}\n",
		"rules:\n  - {name: a, client_id: \"*\", route: \"*\", limit: 1, window: 1s, 4eC39HqLyjWDarjtT1zdp7dc: 1}\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := rules.ParseFile(data)
		if err != nil {
			var ve *rules.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, rules.ErrInvalidRule) {
				t.Fatalf("ParseFile = %v: not a *ValidationError wrapping ErrInvalidRule", err)
			}
			// The values ParseFile quotes on purpose (truncated).
			var lenient rules.File
			_ = yaml.Unmarshal(data, &lenient)
			quoted := func(line string) bool {
				for _, s := range lenient.Rules {
					if strings.Contains(s.Name, line) || strings.Contains(s.Window, line) || strings.Contains(s.Algorithm, line) {
						return true
					}
					for _, ts := range s.Tiers {
						if strings.Contains(ts.Window, line) {
							return true
						}
					}
				}
				return false
			}
			for _, word := range leaktest.KeyWords(string(data)) {
				if w, ok := leaktest.Quotes(err.Error(), word); ok && !quoted(w) {
					t.Fatalf("the error quotes %q, of %q in the file: %v", w, word, err)
				}
			}
			return
		}
		specs := make([]rules.Spec, len(rs))
		for i, r := range rs {
			specs[i] = r.Spec()
		}
		out, err := yaml.Marshal(rules.File{Rules: specs})
		if err != nil {
			t.Fatal(err)
		}
		again, err := rules.ParseFile(out)
		if err != nil {
			t.Fatalf("the accepted rules written back do not parse: %v\n%s", err, out)
		}
		if len(again) != len(rs) {
			t.Fatalf("%d rules, %d once written back", len(rs), len(again))
		}
		for i := range rs {
			if a, b := again[i].Spec(), specs[i]; !reflect.DeepEqual(a, b) {
				t.Fatalf("rule %d written back reads %+v, was %+v", i, a, b)
			}
		}
	})
}
