package envoyconf_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// TestParseLikeUpstream: files that envoyproxy/ratelimit's parser
// (gopkg.in/yaml.v2) accepts load, with the values it reads.
func TestParseLikeUpstream(t *testing.T) {
	cases := []struct {
		name, yaml string
		domain     string
		desc       []envoyconf.Entry
		requests   uint32
		shadow     bool
	}{
		{"repeated top-level key: the last wins",
			"domain: first\ndomain: last\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n",
			"last", kv("k", "v"), 1, false},
		{"repeated nested key: the last wins",
			"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, requests_per_unit: 7}\n",
			"d", kv("k", "v"), 7, false},
		{"repeated descriptors list: the last wins",
			"domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: 1}}\ndescriptors:\n  - {key: b, rate_limit: {unit: second, requests_per_unit: 2}}\n",
			"d", kv("b", "v"), 2, false},
		{"date value is its text",
			"domain: d\ndescriptors:\n  - key: day\n    value: 2024-06-01\n    rate_limit: {unit: day, requests_per_unit: 3}\n",
			"d", kv("day", "2024-06-01"), 3, false},
		{"timestamp value is its text",
			"domain: d\ndescriptors:\n  - key: at\n    value: 2001-12-14t21:59:43.10-05:00\n    rate_limit: {unit: day, requests_per_unit: 4}\n",
			"d", kv("at", "2001-12-14t21:59:43.10-05:00"), 4, false},
		{"date domain is its text",
			"domain: 2024-06-01\ndescriptors:\n  - {key: k, rate_limit: {unit: day, requests_per_unit: 5}}\n",
			"2024-06-01", kv("k", "v"), 5, false},
		{"YAML 1.1 boolean yes",
			"domain: d\ndescriptors:\n  - key: k\n    shadow_mode: yes\n    rate_limit: {unit: day, requests_per_unit: 6}\n",
			"d", kv("k", "v"), 6, true},
		{"YAML 1.1 boolean value is its text",
			"domain: d\ndescriptors:\n  - key: k\n    value: on\n    rate_limit: {unit: day, requests_per_unit: 8}\n",
			"d", kv("k", "on"), 8, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := envoyconf.Parse([]envoyconf.File{{Name: "f.yaml", Data: []byte(tc.yaml)}})
			require.NoError(t, err)
			require.True(t, c.HasDomain(tc.domain))
			m := c.Match(tc.domain, tc.desc)
			require.NotNil(t, m.Limit)
			assert.Equal(t, tc.requests, m.Limit.RequestsPerUnit)
			assert.Equal(t, tc.shadow, m.Limit.ShadowMode)
		})
	}
}

// TestLoadWalksLikeUpstream: a directory loads the files goruntime's loader
// gives envoyproxy/ratelimit (with its default RUNTIME_IGNOREDOTFILES=false):
// every file below it, whatever its name, hidden ones included.
func TestLoadWalksLikeUpstream(t *testing.T) {
	limit := func(domain string) string {
		return "domain: " + domain + "\ndescriptors:\n  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n"
	}
	type link struct{ name, target string }
	cases := []struct {
		name  string
		files map[string]string // relative name -> contents
		links []link            // relative name -> target (relative to the link)
		want  []string          // Files(), in load order
		err   string            // else the error's text
		is    error             // and what it wraps
		dots  bool              // LoadOptions.IgnoreDotFiles
	}{
		{name: "nested subdirectories",
			files: map[string]string{"a.yaml": limit("a"), "sub/b.yaml": limit("b"), "sub/deeper/c.yml": limit("c")},
			want:  []string{"a.yaml", "sub/b.yaml", "sub/deeper/c.yml"}},
		{name: "any extension or none",
			files: map[string]string{"a.conf": limit("a"), "b": limit("b"), "c.yaml.bak": limit("c")},
			want:  []string{"a.conf", "b", "c.yaml.bak"}},
		{name: "hidden files and directories",
			files: map[string]string{".a.yaml": limit("a"), ".hidden/b.yaml": limit("b"), "c.yaml": limit("c")},
			want:  []string{".a.yaml", ".hidden/b.yaml", "c.yaml"}},
		{name: "a file that is not a config is an error",
			files: map[string]string{"a.yaml": limit("a"), "notes.txt": "not yaml: ["},
			err:   "notes.txt: error loading config file", is: envoyconf.ErrInvalidConfig},
		{name: "a domain in a subdirectory and beside it is a duplicate",
			files: map[string]string{"a.yaml": limit("a"), "old/a.yaml": limit("a")},
			err:   "old/a.yaml: duplicate domain \"a\"", is: envoyconf.ErrInvalidConfig},
		{name: "symlink to a file is read",
			files: map[string]string{"a.yaml": limit("a"), "../elsewhere/b.txt": limit("b")},
			links: []link{{"b.yaml", "../elsewhere/b.txt"}},
			want:  []string{"a.yaml", "b.yaml"}},
		{name: "symlink to a directory is not followed",
			files: map[string]string{"a.yaml": limit("a"), "../elsewhere/b.yaml": limit("b")},
			links: []link{{"more", "../elsewhere"}},
			want:  []string{"a.yaml"}},
		{name: "a Kubernetes ConfigMap volume loads its files twice",
			files: map[string]string{"..2024_06_01/a.yaml": limit("a")},
			links: []link{{"..data", "..2024_06_01"}, {"a.yaml", "..data/a.yaml"}},
			err:   "a.yaml: duplicate domain \"a\"", is: envoyconf.ErrInvalidConfig},
		{name: "ignoring dot files: a Kubernetes ConfigMap volume loads once", dots: true,
			files: map[string]string{"..2024_06_01/a.yaml": limit("a")},
			links: []link{{"..data", "..2024_06_01"}, {"a.yaml", "..data/a.yaml"}},
			want:  []string{"a.yaml"}},
		{name: "ignoring dot files: hidden files and directories skipped", dots: true,
			files: map[string]string{".a.yaml": limit("a"), ".hidden/b.yaml": limit("b"), "sub/.c.yaml": limit("c"), "a.yaml": limit("a")},
			want:  []string{"a.yaml"}},
		{name: "a dangling symlink is an error, not skipped",
			files: map[string]string{"a.yaml": limit("a")},
			links: []link{{"b.yaml", "missing.yaml"}},
			err:   "b.yaml", is: os.ErrNotExist},
		{name: "nothing to load but a symlink to a directory",
			files: map[string]string{"../elsewhere/a.yaml": limit("a")},
			links: []link{{"more", "../elsewhere"}},
			err:   "no config files", is: envoyconf.ErrNoFiles},
		// goruntime names both "config.a.b.yaml" and envoyproxy/ratelimit
		// keeps only a.b.yaml (walked after a/), so domain b is unlimited
		// there; ratedb loads both (a documented difference).
		{name: "paths that differ only by / for . both load",
			files: map[string]string{"a/b.yaml": limit("b"), "a.b.yaml": limit("a")},
			want:  []string{"a/b.yaml", "a.b.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			top := t.TempDir()
			dir := filepath.Join(top, "config")
			require.NoError(t, os.Mkdir(dir, 0o700))
			for name, data := range tc.files {
				p := filepath.Join(dir, filepath.FromSlash(name))
				require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
				require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
			}
			for _, l := range tc.links {
				require.NoError(t, os.Symlink(filepath.FromSlash(l.target), filepath.Join(dir, filepath.FromSlash(l.name))))
			}
			lo := envoyconf.LoadOptions{IgnoreDotFiles: tc.dots}
			c, err := envoyconf.LoadWith(dir, lo)
			if tc.err != "" {
				require.ErrorIs(t, err, tc.is)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, c.Files())
			for i, d := range []string{"a", "b", "c"}[:len(tc.want)] {
				assert.True(t, c.HasDomain(d), "%s declares %s", tc.want[i], d)
			}
			stamp := envoyconf.StampWith(dir, lo)
			require.NotEmpty(t, stamp)
			for _, f := range tc.want {
				assert.Contains(t, stamp, f, "the poller watches every loaded file")
			}
		})
	}
}

// TestLoadThroughSymlinkedDirectory: the path given may be a symlink to the
// config directory (as $RUNTIME_ROOT often is), and a change below it, even
// in a subdirectory or a swap of the symlink, changes the stamp.
func TestLoadThroughSymlinkedDirectory(t *testing.T) {
	top := t.TempDir()
	write := func(name, domain string) {
		p := filepath.Join(top, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte("domain: "+domain+"\n"), 0o600))
	}
	write("v1/a.yaml", "a")
	write("v2/a.yaml", "a")
	current := filepath.Join(top, "current")
	require.NoError(t, os.Symlink("v1", current))

	c, err := envoyconf.Load(current)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml"}, c.Files())

	s1 := envoyconf.Stamp(current)
	write("v1/sub/b.yaml", "b")
	s2 := envoyconf.Stamp(current)
	assert.NotEqual(t, s1, s2, "a new file in a subdirectory")
	c, err = envoyconf.Load(current)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.yaml", "sub/b.yaml"}, c.Files())

	require.NoError(t, os.Remove(current))
	require.NoError(t, os.Symlink("v2", current))
	assert.NotEqual(t, s2, envoyconf.Stamp(current), "the symlink now names another directory")
}

// IgnoreDotFiles skips the hidden files and directories below the path
// given, never the directory given itself, though its name (or, through a
// symlink, its target's) starts with a dot: ~/.ratelimit, or a ConfigMap
// volume's "..data".
func TestIgnoreDotFilesKeepsAHiddenRoot(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, ".ratelimit")
	require.NoError(t, os.Mkdir(dir, 0o700))
	for name, domain := range map[string]string{"a.yaml": "a", ".b.yaml": "b"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("domain: "+domain+"\n"), 0o600))
	}
	link := filepath.Join(top, "config")
	require.NoError(t, os.Symlink(".ratelimit", link))
	o := envoyconf.LoadOptions{IgnoreDotFiles: true}
	for _, path := range []string{dir, link} {
		c, err := envoyconf.LoadWith(path, o)
		require.NoError(t, err, path)
		assert.Equal(t, []string{"a.yaml"}, c.Files(), path)
		assert.Contains(t, envoyconf.StampWith(path, o), "a.yaml", path)
	}
}
