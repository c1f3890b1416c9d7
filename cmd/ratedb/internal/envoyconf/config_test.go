package envoyconf_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// kv builds a descriptor from key, value pairs.
func kv(pairs ...string) []envoyconf.Entry {
	out := make([]envoyconf.Entry, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, envoyconf.Entry{Key: pairs[i], Value: pairs[i+1]})
	}
	return out
}

type want struct {
	requests  uint32
	unit      envoyconf.Unit
	unlimited bool
	shadow    bool
	name      string
	path      string
}

func checkMatches(t *testing.T, c *envoyconf.Config, domain string, cases []struct {
	name  string
	desc  []envoyconf.Entry
	limit *want
}) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := c.Match(domain, tc.desc)
			if tc.limit == nil {
				assert.Nil(t, m.Limit)
				return
			}
			require.NotNil(t, m.Limit)
			assert.Equal(t, tc.limit.requests, m.Limit.RequestsPerUnit)
			assert.Equal(t, tc.limit.unit, m.Limit.Unit)
			assert.Equal(t, tc.limit.unlimited, m.Limit.Unlimited)
			assert.Equal(t, tc.limit.shadow, m.Limit.ShadowMode)
			assert.Equal(t, tc.limit.name, m.Limit.Name)
			if tc.limit.path != "" {
				assert.Equal(t, tc.limit.path, m.Limit.Path)
			}
		})
	}
}

func TestMatchBasic(t *testing.T) {
	c, err := envoyconf.Load("testdata/basic.yaml")
	require.NoError(t, err)
	assert.True(t, c.HasDomain("test-domain"))
	assert.False(t, c.HasDomain("other"))
	checkMatches(t, c, "test-domain", []struct {
		name  string
		desc  []envoyconf.Entry
		limit *want
	}{
		{"unknown domain is checked elsewhere", nil, nil},
		{"empty descriptor", kv(), nil},
		{"top level without limit", kv("key1", "value1"), nil},
		{"unknown value of a key with only values", kv("key1", "something"), nil},
		{"deeper than the config", kv("key2", "value2", "subkey", "subvalue"), nil},
		{"second level value not declared", kv("key5", "value5", "subkey5", "subvalue"), nil},
		{"key-only at second level", kv("key1", "value1", "subkey1", "something"),
			&want{requests: 5, unit: envoyconf.Second, path: "test-domain.key1_value1.subkey1"}},
		{"value beats key-only at second level", kv("key1", "value1", "subkey1", "subvalue1"),
			&want{requests: 10, unit: envoyconf.Second, path: "test-domain.key1_value1.subkey1_subvalue1"}},
		{"key-only at top level", kv("key2", "something"), &want{requests: 20, unit: envoyconf.Minute, path: "test-domain.key2"}},
		{"value beats key-only at top level", kv("key2", "value2"), &want{requests: 30, unit: envoyconf.Minute}},
		{"value without limit allow-lists, no backtracking", kv("key2", "value3"), nil},
		{"hour", kv("key3", "foo"), &want{requests: 1, unit: envoyconf.Hour}},
		{"named limit", kv("key4", "foo"), &want{requests: 1, unit: envoyconf.Day, name: "key4_rate_limit"}},
		{"limit at first level, request at first level", kv("key5", "value5"), &want{requests: 15, unit: envoyconf.Day}},
		{"limit at both levels, request at second", kv("key5", "value5", "subkey5", "subvalue5"), &want{requests: 25, unit: envoyconf.Day}},
		{"unlimited", kv("key6", "foo"), &want{unlimited: true}},
		{"detailed metric changes nothing", kv("key7", "unspecified_value"), &want{requests: 70, unit: envoyconf.Minute}},
		{"shadow mode", kv("key8", "x"), &want{requests: 3, unit: envoyconf.Week, shadow: true}},
		{"shallower than the config", kv("key1", "value1"), nil},
	})
	assert.Nil(t, c.Match("foo_domain", kv("key2", "x")).Limit, "unknown domain")
}

func TestMatchWildcard(t *testing.T) {
	c, err := envoyconf.Load("testdata/wildcard.yaml")
	require.NoError(t, err)
	checkMatches(t, c, "wild-domain", []struct {
		name  string
		desc  []envoyconf.Entry
		limit *want
	}{
		{"key-only counts every value", kv("noVal", "foo1"), &want{requests: 20, unit: envoyconf.Minute, path: "wild-domain.noVal"}},
		{"wildcard matches a value with the prefix", kv("wild", "foo2"), &want{requests: 20, unit: envoyconf.Minute, path: "wild-domain.wild_foo*"}},
		{"wildcard matches the bare prefix", kv("wild", "foo"), &want{requests: 20, unit: envoyconf.Minute}},
		{"first wildcard in file order wins, not the longest", kv("wild", "fab"), &want{requests: 21, unit: envoyconf.Minute}},
		{"exact value beats every wildcard", kv("wild", "foo1"), &want{requests: 22, unit: envoyconf.Minute}},
		{"nested wildcard", kv("nestedWild", "val1", "wild", "goo2"), &want{requests: 23, unit: envoyconf.Minute}},
		{"wildcard does not match another prefix", kv("wild", "bar"), nil},
		{"a value without * does not match its prefixes", kv("noWild", "foo1"), nil},
		{"* in the middle matches a run", kv("midWild", "barab"), &want{requests: 20, unit: envoyconf.Minute, path: "wild-domain.midWild_bar*b"}},
		{"* in the middle matches a longer run", kv("midWild", "bar123b"), &want{requests: 20, unit: envoyconf.Minute}},
		{"* in the middle matches nothing", kv("midWild", "barb"), &want{requests: 20, unit: envoyconf.Minute}},
		{"* in the middle matches itself", kv("midWild", "bar*b"), &want{requests: 20, unit: envoyconf.Minute}},
		{"middle wildcard: the suffix is required", kv("midWild", "bara"), nil},
		{"middle wildcard: the prefix is required", kv("midWild", "xbarb"), nil},
		{"multiple wildcards in order", kv("multiWild", "foo123bar456baz"), &want{requests: 10, unit: envoyconf.Minute, path: "wild-domain.multiWild_foo*bar*baz"}},
		{"multiple wildcards matching nothing", kv("multiWild", "foobarbaz"), &want{requests: 10, unit: envoyconf.Minute}},
		{"multiple wildcards: a middle part missing", kv("multiWild", "foo123baz"), nil},
		{"multiple wildcards: the prefix missing", kv("multiWild", "bar456baz"), nil},
		{"multiple wildcards: the middle part only inside the suffix", kv("multiWild", "foobaz"), nil},
		{"prefix and suffix may not overlap", kv("overlap", "aba"), nil},
		{"prefix and suffix side by side", kv("overlap", "abba"), &want{requests: 11, unit: envoyconf.Minute}},
	})
}

func TestMatchShareThreshold(t *testing.T) {
	c, err := envoyconf.Load("testdata/wildcard.yaml")
	require.NoError(t, err)
	m := c.Match("wild-domain", kv("shared", "files/a.txt"))
	require.NotNil(t, m.Limit)
	assert.Equal(t, []string{"files/*"}, m.Share, "every value under the wildcard shares one counter")
	m = c.Match("wild-domain", kv("wild", "foo9"))
	require.NotNil(t, m.Limit)
	assert.Nil(t, m.Share, "a wildcard without share_threshold counts each value")
	for _, v := range []string{"svcAepBrpc", "svcXXXepYYYrpc", "svceprpc"} {
		m = c.Match("wild-domain", kv("midShared", v))
		require.NotNil(t, m.Limit, v)
		assert.Equal(t, []string{"svc*ep*rpc"}, m.Share, "%s shares the multiple wildcard's counter", v)
	}
	assert.Nil(t, c.Match("wild-domain", kv("midShared", "svcABCrpc")).Limit, "the middle part is required")
}

// TestCompositeKeyAmbiguity pins a quirk we keep for compatibility: entries
// are addressed by key + "_" + value.
func TestCompositeKeyAmbiguity(t *testing.T) {
	_, err := envoyconf.Parse([]envoyconf.File{{Name: "a.yaml", Data: []byte(`
domain: d
descriptors:
  - {key: a, value: b_c, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: a_b, value: c, rate_limit: {unit: second, requests_per_unit: 2}}
`)}})
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "duplicate descriptor composite key")

	c, err := envoyconf.Parse([]envoyconf.File{{Name: "a.yaml", Data: []byte(`
domain: d
descriptors:
  - {key: a, value: b_c, rate_limit: {unit: second, requests_per_unit: 1}}
`)}})
	require.NoError(t, err)
	m := c.Match("d", kv("a_b", "c"))
	require.NotNil(t, m.Limit)
	assert.EqualValues(t, 1, m.Limit.RequestsPerUnit)

	// No config key is empty, but a request's empty key is addressed the
	// same way: key "" with value "x_y" is the entry _x / y.
	c, err = envoyconf.Parse([]envoyconf.File{{Name: "a.yaml", Data: []byte(`
domain: d
descriptors:
  - {key: _x, value: y, rate_limit: {unit: second, requests_per_unit: 3}}
`)}})
	require.NoError(t, err)
	m = c.Match("d", kv("", "x_y"))
	require.NotNil(t, m.Limit, "an empty key matches the entry its composite addresses")
	assert.EqualValues(t, 3, m.Limit.RequestsPerUnit)
	assert.Nil(t, c.Match("d", kv("", "y")).Limit)
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, yaml, msg string
	}{
		{"bad unit", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    rate_limit: {unit: foo, requests_per_unit: 5}\n", "invalid rate limit unit"},
		{"missing unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 5}\n", "invalid rate limit unit"},
		{"unknown is no unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: unknown, requests_per_unit: 5}\n", "invalid rate limit unit"},
		{"bad yaml", "'''\n", "error loading config file"},
		{"duplicate key", "domain: d\ndescriptors:\n  - key: key1\n    value: value1\n  - key: key1\n    value: value1\n", "duplicate descriptor composite key \"d.key1_value1\""},
		{"duplicate nested key", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n      - key: b\n", "duplicate descriptor composite key \"d.a.b\""},
		{"empty domain", "descriptors:\n", "empty domain"},
		{"empty file", "", "empty domain"},
		{"empty key", "domain: d\ndescriptors:\n  - value: value1\n", "empty key"},
		{"misspelled rate_limit", "domain: d\ndescriptors:\n  - key: k\n    ratelimit: {unit: day, requests_per_unit: 5}\n", "unknown key (did you mean rate_limit?)"},
		{"misspelled requests_per_unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requestsperunit: 5}\n", "unknown key (did you mean requests_per_unit?)"},
		{"non-string key", "0.25: d\ndescriptors:\n  - key: k\n", "a key is of type float64, not string"},
		{"list of scalars", "domain: d\ndescriptors:\n  - a\n  - b\n", "list of type other than map"},
		{"float leaf", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1.5}\n", "of type float64"},
		{"negative limit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: -1}\n", "error loading config file"},
		{"unlimited with unit", "domain: d\ndescriptors:\n  - key: foo\n    rate_limit: {unlimited: true, unit: day, requests_per_unit: 25}\n", "should not specify rate limit unit when unlimited"},
		{"replaces itself", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: self, replaces: [{name: self}], unit: second, requests_per_unit: 5}\n", "replaces should not contain name of same descriptor"},
		{"empty replaces", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: self, replaces: [{name: }], unit: second, requests_per_unit: 5}\n", "empty replaces entry"},
		{"name not UTF-8", "domain: d\ndescriptors:\n  - key: k\n    value: !!binary dv8=\n    rate_limit: {name: !!binary bv8=, unit: second, requests_per_unit: 5}\n", `rate_limit name of descriptor "d.k_v\xff" is not valid UTF-8`},
		{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", "share_threshold can only be used with wildcard values"},
		{"document is a list", "- domain: d\n", "cannot unmarshal !!seq"},
		{"document is a scalar", "domain\n", "cannot unmarshal !!str"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := envoyconf.Parse([]envoyconf.File{{Name: "f.yaml", Data: []byte(tc.yaml)}})
			require.ErrorIs(t, err, envoyconf.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Contains(t, err.Error(), "f.yaml")
		})
	}
}

// TestRuleNameNotUTF8: a rate_limit name that is not UTF-8 (!!binary) is
// refused (TestParseErrors), but not on an unlimited limit, whose answers
// carry no current_limit: that one loads with its name, as upstream loads it.
func TestRuleNameNotUTF8(t *testing.T) {
	c, err := envoyconf.Parse([]envoyconf.File{{Name: "f.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: !!binary bv8=, unlimited: true}\n")}})
	require.NoError(t, err)
	m := c.Match("d", kv("k", "v"))
	require.NotNil(t, m.Limit)
	assert.True(t, m.Limit.Unlimited)
	assert.Equal(t, "n\xff", m.Limit.Name)
}

// TestMetadata: a descriptor's metadata (envoyproxy/ratelimit since April
// 2026) is free-form, checked as upstream converts it, and changes no
// decision.
func TestMetadata(t *testing.T) {
	parse := func(yaml string) (*envoyconf.Config, error) {
		return envoyconf.Parse([]envoyconf.File{{Name: "f.yaml", Data: []byte(yaml)}})
	}
	c, err := parse(`domain: d
descriptors:
  - key: k
    metadata:
      team: payments
      colour: {1: one, nested: [a, {b: 2}], flag: true, none: null}
    rate_limit: {unit: second, requests_per_unit: 3}
`)
	require.NoError(t, err, "any keys and values inside metadata")
	require.NotNil(t, c.Match("d", kv("k", "v")).Limit)
	assert.EqualValues(t, 3, c.Match("d", kv("k", "v")).Limit.RequestsPerUnit)

	_, err = parse("domain: d\ndescriptors:\n  - key: k\n    metadata: 5\n")
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig, "metadata must be a mapping")
	assert.Contains(t, err.Error(), "error loading config file")
	_, err = parse("domain: d\ndescriptors:\n  - key: k\n    metadata: {blob: !!binary /w==}\n")
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig, "a string that is not UTF-8")
	assert.Contains(t, err.Error(), "error parsing metadata")
	_, err = parse("domain: d\ndescriptors:\n  - key: k\n    metadat: {a: b}\n")
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig, "other unknown keys are still refused")
}

func TestDuplicateDomainAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: 1}}\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.yml"), []byte("domain: d\ndescriptors:\n  - {key: b, rate_limit: {unit: second, requests_per_unit: 1}}\n"), 0o600))
	_, err := envoyconf.Load(dir)
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "b.yml: duplicate domain \"d\"")
}

// TestMergeDomains: with MergeDomains (upstream's MERGE_DOMAIN_CONFIG=true)
// the files of one domain add to its top level, in load order; an entry two
// files declare is still a duplicate.
func TestMergeDomains(t *testing.T) {
	limit := func(domain, key, value string, n int) string {
		return fmt.Sprintf("domain: %s\ndescriptors:\n  - {key: %s, value: %q, rate_limit: {unit: second, requests_per_unit: %d}}\n", domain, key, value, n)
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(limit("d", "path", "/a*", 1)), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(limit("d", "path", "/ab*", 2)+
		"  - key: user\n    descriptors:\n      - {key: plan, rate_limit: {unit: minute, requests_per_unit: 3}}\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(limit("e", "k", "", 4)), 0o600))
	c, err := envoyconf.LoadWith(dir, envoyconf.LoadOptions{MergeDomains: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml", "b.yaml", "c.yaml"}, c.Files())
	assert.Equal(t, uint32(1), c.Match("d", kv("path", "/abc")).Limit.RequestsPerUnit, "a.yaml's wildcard loaded first, so it comes first")
	assert.Equal(t, uint32(3), c.Match("d", kv("user", "u", "plan", "p")).Limit.RequestsPerUnit, "b.yaml's nested descriptors")
	assert.Equal(t, uint32(4), c.Match("e", kv("k", "v")).Limit.RequestsPerUnit)
	assert.Len(t, c.Rules(), 4)

	_, err = envoyconf.Load(dir)
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig, "without MergeDomains a domain in two files is refused")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(limit("d", "path", "/a*", 2)), 0o600))
	_, err = envoyconf.LoadWith(dir, envoyconf.LoadOptions{MergeDomains: true})
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "b.yaml: duplicate descriptor composite key \"d.path_/a*\"")
}

func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("domain: b\ndescriptors:\n  - {key: k, rate_limit: {unit: SECOND, requests_per_unit: 2}}\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: a\ndescriptors:\n  - {key: k, rate_limit: {unit: Minute, requests_per_unit: 1}}\n"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o700)) // an empty directory adds nothing
	c, err := envoyconf.Load(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml", "b.yaml"}, c.Files())
	assert.Equal(t, envoyconf.Minute, c.Match("a", kv("k", "1")).Limit.Unit, "units are case-insensitive")
	assert.Equal(t, envoyconf.Second, c.Match("b", kv("k", "1")).Limit.Unit)

	rules := c.Rules()
	require.Len(t, rules, 2)
	assert.Equal(t, "a", rules[0].Domain)
	assert.Equal(t, kv("k", ""), rules[0].Descriptor)

	_, err = envoyconf.Load(t.TempDir())
	require.ErrorIs(t, err, envoyconf.ErrNoFiles)
	_, err = envoyconf.Load(filepath.Join(dir, "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestStampChangesWithFiles(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.yaml")
	require.NoError(t, os.WriteFile(f, []byte("domain: a\n"), 0o600))
	s1 := envoyconf.Stamp(dir)
	require.NotEmpty(t, s1)
	assert.Equal(t, s1, envoyconf.Stamp(dir))
	require.NoError(t, os.Chtimes(f, time.Unix(1, 0), time.Unix(1, 0)))
	assert.NotEqual(t, s1, envoyconf.Stamp(dir))
	assert.Empty(t, envoyconf.Stamp(filepath.Join(dir, "missing")))
}

// A new version with the old one's size and mtime (Nix store files all
// have mtime 1; `cp -p`, SOURCE_DATE_EPOCH) changes the stamp.
func TestStampSeesContentWithSameSizeAndMtime(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.yaml")
	write := func(data string) {
		require.NoError(t, os.WriteFile(f, []byte(data), 0o600))
		require.NoError(t, os.Chtimes(f, time.Unix(1, 0), time.Unix(1, 0)))
	}
	write("domain: a\n")
	s1 := envoyconf.Stamp(dir)
	write("domain: b\n")
	assert.NotEqual(t, s1, envoyconf.Stamp(dir))
}

func TestUnits(t *testing.T) {
	const day = 24 * time.Hour
	cases := []struct {
		unit envoyconf.Unit
		name string
		d    time.Duration
	}{
		{envoyconf.Second, "second", time.Second},
		{envoyconf.Minute, "minute", time.Minute},
		{envoyconf.Hour, "hour", time.Hour},
		{envoyconf.Day, "day", day},
		{envoyconf.Week, "week", 7 * day},
		{envoyconf.Month, "month", 30 * day},
		{envoyconf.Year, "year", 365 * day},
		{envoyconf.Unknown, "unknown", 0},
		{envoyconf.Unit(99), "unknown", 0},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.name, tc.unit.String())
		assert.Equal(t, tc.d, tc.unit.Duration(), tc.name)
	}
	// The Unix epoch was a Thursday, so epoch-aligned weeks start on Thursdays.
	assert.Equal(t, time.Thursday, time.Unix(0, 0).UTC().Weekday())
}

// TestIntegrationConfigsLoad: the configs the grpcapi and envoye2e tests
// share load as one directory.
func TestIntegrationConfigsLoad(t *testing.T) {
	c, err := envoyconf.Load("testdata/integration")
	require.NoError(t, err)
	assert.Equal(t, []string{"another.yaml", "basic.yaml", "features.yaml"}, c.Files())
	for _, d := range []string{"basic", "another", "features"} {
		assert.True(t, c.HasDomain(d), d)
	}
}

// TestLoadRefusesAFileOver16MiB: a config file is at most 16 MiB (real ones
// are a few KiB); envoyproxy/ratelimit has no bound. The file is refused,
// not cut: a prefix of it could load with fewer limits.
func TestLoadRefusesAFileOver16MiB(t *testing.T) {
	dir := t.TempDir()
	head := "domain: big\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n"
	data := []byte(head + "#" + strings.Repeat("x", 16<<20-len(head)) + "\n")
	require.Greater(t, len(data), 16<<20)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.yaml"), data, 0o600))
	_, err := envoyconf.Load(dir)
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "big.yaml: file larger than")
	_, err = envoyconf.Parse([]envoyconf.File{{Name: "big.yaml", Data: data}})
	require.ErrorIs(t, err, envoyconf.ErrInvalidConfig)
}

// A file of exactly 16 MiB is not over the bound: it loads, from a
// directory and through Parse.
func TestLoadAcceptsAFileOfExactly16MiB(t *testing.T) {
	head := "domain: big\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n#"
	data := []byte(head + strings.Repeat("x", 16<<20-len(head)-1) + "\n")
	require.Len(t, data, 16<<20)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.yaml"), data, 0o600))
	c, err := envoyconf.Load(dir)
	require.NoError(t, err)
	assert.Len(t, c.Rules(), 1)
	c, err = envoyconf.Parse([]envoyconf.File{{Name: "big.yaml", Data: data}})
	require.NoError(t, err)
	assert.Len(t, c.Rules(), 1)
}

// shadow_mode, quota_mode and detailed_metric each set their own field of
// the Limit, and only it.
func TestModesSetTheirOwnField(t *testing.T) {
	c, err := envoyconf.Parse([]envoyconf.File{{Name: "f.yaml", Data: []byte(`domain: d
descriptors:
  - {key: shadow, shadow_mode: true, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: quota, quota_mode: true, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: detailed, detailed_metric: true, rate_limit: {unit: second, requests_per_unit: 1}}
`)}})
	require.NoError(t, err)
	for _, tc := range []struct {
		key                     string
		shadow, quota, detailed bool
	}{
		{key: "shadow", shadow: true},
		{key: "quota", quota: true},
		{key: "detailed", detailed: true},
	} {
		l := c.Match("d", kv(tc.key, "v")).Limit
		require.NotNil(t, l, tc.key)
		assert.Equal(t, tc.shadow, l.ShadowMode, "%s: ShadowMode", tc.key)
		assert.Equal(t, tc.quota, l.QuotaMode, "%s: QuotaMode", tc.key)
		assert.Equal(t, tc.detailed, l.DetailedMetric, "%s: DetailedMetric", tc.key)
	}
}
