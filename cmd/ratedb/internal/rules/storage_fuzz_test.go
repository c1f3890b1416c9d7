package rules_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// FuzzStoredRules feeds a Manager arbitrary stored rules files
// (PATH.rules.json; the rules value in Redis is the same list of rules,
// read by the same json.Unmarshal): NewManager never panics, and a file it
// accepts is served exactly, each stored rule under its name with its
// generation and spec, and no other; saved and loaded again, the rules are
// the same.
func FuzzStoredRules(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"rules":[{"name":"x","client_id":"c","route":"*","limit":3,"window":"1m","generation":4}]}`,
		`{"version":1,"rules":[{"name":"t","client_id":"*","route":"/a/*","algorithm":"staggered","tiers":[{"limit":1,"window":"1m"},{"limit":3,"window":"15m"}],"generation":1}]}`,
		`{"version":1,"rules":[{"name":"bad","client_id":"c","route":"*","limit":-1,"window":"1m","generation":4}]}`,
		`{"version":1,"rules":[{"name":"a","client_id":"c","route":"*","limit":1,"window":"1s"},{"name":"a","client_id":"d","route":"*","limit":1,"window":"1s"}]}`,
		`{"version":2,"rules":[]}`,
		`{"version":1,"rules":null}`,
		`{"version":1}`,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	def, err := rules.Build(rules.DefaultName, rules.Spec{ClientID: "*", Route: "*", Limit: i64(100), Window: "60s"}, true)
	if err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(f.TempDir(), "rate.db.rules.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		store := rules.FileStorage{Path: path}
		m, err := rules.NewManager(store, def)
		if err != nil {
			return
		}
		var file struct {
			Rules []rules.Stored `json:"rules"`
		}
		if err := json.Unmarshal(data, &file); err != nil {
			t.Fatalf("accepted a file encoding/json refuses: %v", err)
		}
		served := m.Current().Rules()
		if len(served) != len(file.Rules) {
			t.Fatalf("%d rules stored, %d served", len(file.Rules), len(served))
		}
		for _, s := range file.Rules {
			r, ok := m.Current().Get(s.Name)
			if !ok || r.Name != s.Name || r.Generation != s.Generation {
				t.Fatalf("the stored rule %q (generation %d) is served as %+v", s.Name, s.Generation, r)
			}
			want, err := rules.Build(s.Name, s.Spec, false)
			if err != nil {
				t.Fatalf("the stored rule %q was accepted but does not build: %v", s.Name, err)
			}
			if !reflect.DeepEqual(r.Spec(), want.Spec()) {
				t.Fatalf("the stored rule %q is served as %+v, stored as %+v", s.Name, r.Spec(), want.Spec())
			}
		}
		again := make([]rules.Stored, len(served))
		for i, r := range served {
			again[i] = rules.Stored{Spec: r.Spec(), Generation: r.Generation}
		}
		if err := store.Save(again); err != nil {
			t.Fatal(err)
		}
		m2, err := rules.NewManager(store, def)
		if err != nil {
			t.Fatalf("the served rules, saved, do not load: %v", err)
		}
		for i, r := range m2.Current().Rules() {
			if !reflect.DeepEqual(r.Spec(), served[i].Spec()) || r.Generation != served[i].Generation {
				t.Fatalf("saved and loaded, %+v became %+v", served[i], r)
			}
		}
	})
}
