package envoyconf_test

// Tests added after mutation testing (TestGap...): each fails with one
// deliberate bug that the rest of the package's tests let through.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

// IgnoreDotFiles skips the hidden files and directories below the path
// given, never the directory given itself, though its name (or, through a
// symlink, its target's) starts with a dot: ~/.ratelimit, or a ConfigMap
// volume's "..data".
func TestGapIgnoreDotFilesKeepsAHiddenRoot(t *testing.T) {
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

// A file of exactly 16 MiB is not over the bound: it loads, from a
// directory and through Parse.
func TestGapLoadAcceptsAFileOfExactly16MiB(t *testing.T) {
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
func TestGapModesSetTheirOwnField(t *testing.T) {
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

// Rules gives every rule its own Descriptor: siblings four levels deep,
// where appending to the parent's path could write into one shared array,
// keep their own last entry.
func TestGapRulesDeepSiblingsKeepTheirOwnDescriptor(t *testing.T) {
	c, err := envoyconf.Parse([]envoyconf.File{{Name: "f.yaml", Data: []byte(`domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        descriptors:
          - key: c
            value: "1"
            descriptors:
              - {key: x, rate_limit: {unit: second, requests_per_unit: 1}}
              - {key: y, rate_limit: {unit: second, requests_per_unit: 2}}
`)}})
	require.NoError(t, err)
	rules := c.Rules()
	require.Len(t, rules, 2)
	assert.Equal(t, kv("a", "", "b", "", "c", "1", "x", ""), rules[0].Descriptor)
	assert.Equal(t, kv("a", "", "b", "", "c", "1", "y", ""), rules[1].Descriptor)
	assert.EqualValues(t, 1, rules[0].Limit.RequestsPerUnit)
}

// A Watcher's Load that fails because a file cannot be read (a dangling
// symlink) is, like one that fails to parse, the version later polls
// compare with: they do not report the same failure again, and report the
// fix once it has settled.
func TestGapWatcherPollsDoNotRepeatAFailedLoad(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: a\n"), 0o600))
	w := envoyconf.NewWatcher(dir, envoyconf.LoadOptions{})
	_, err := w.Load()
	require.NoError(t, err)
	link := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.Symlink("missing.yaml", link))
	_, err = w.Load() // SIGHUP
	require.ErrorIs(t, err, os.ErrNotExist)
	for range 3 {
		_, changed, err := w.Poll()
		require.NoError(t, err)
		require.False(t, changed, "the failure Load reported")
	}

	require.NoError(t, os.Remove(link))
	_, changed, err := w.Poll()
	require.NoError(t, err)
	require.False(t, changed, "seen once")
	c, changed, err := w.Poll()
	require.NoError(t, err)
	require.True(t, changed)
	assert.Equal(t, []string{"a.yaml"}, c.Files())
}
