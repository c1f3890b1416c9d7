package rules_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/rules"
)

// A stored rule under a reserved name ("default", written by hand or by
// another version) is a stored rule this version refuses, like any other:
// it has no version this instance serves. The default rule is not that
// version: serving it as a stored rule listed it among the rules and made it
// a catch-all wildcard rule that, sorted by name, took precedence over a
// stored catch-all rule whose name sorts after "default".
func TestInvalidStoredRuleNamedDefaultIsNotServed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	store := rules.FileStorage{Path: path}
	m, err := rules.NewManager(store, defaultRule(t))
	require.NoError(t, err)
	_, err = m.Put(mustBuild(t, "zzz", "*", "*", 7, "1m"))
	require.NoError(t, err)

	require.NoError(t, store.Update(func(cur []rules.Stored) ([]rules.Stored, error) {
		return append(cur, rules.Stored{Spec: rules.Spec{Name: rules.DefaultName, ClientID: "*", Route: "*", Limit: i64(1), Window: "1m"}}), nil
	}))
	require.ErrorIs(t, m.Reload(), rules.ErrInvalidRule)
	check := func(what string) {
		t.Helper()
		var names []string
		for _, r := range m.Current().Rules() {
			names = append(names, r.Name)
		}
		assert.Equal(t, []string{"zzz"}, names, "%s: the stored rules served", what)
		r, _ := m.Current().Match("c", "/r")
		assert.Equal(t, "zzz", r.Name, "%s: the stored catch-all rule applies, not the default", what)
	}
	check("after a reload")
	_, err = m.Put(mustBuild(t, "other", "x", "/x", 2, "1m"))
	require.NoError(t, err)
	require.NoError(t, m.Delete("other"))
	check("after a change")
}
