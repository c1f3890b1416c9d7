package keys_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/fileread"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoles(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "client")
	require.NoError(t, os.WriteFile(f, []byte("# clients\n c1 \n\nc2\n"), 0o600))
	k, err := keys.Load(keys.Source{File: f}, keys.Source{Env: "a1, a2,"})
	require.NoError(t, err)
	assert.True(t, k.HasClientKeys())
	for key, want := range map[string]keys.Role{
		"c1": keys.Client, "c2": keys.Client, "a1": keys.Admin, "a2": keys.Admin,
		"": keys.None, "c3": keys.None, " c1": keys.None, "# clients": keys.None,
	} {
		assert.Equal(t, want, k.Role(key), "%q", key)
	}
	g := keys.Generate()
	assert.Equal(t, keys.None, k.Role(g))
	assert.Equal(t, keys.Client, k.AddClient(g).Role(g))
	assert.Equal(t, keys.None, k.Role(g), "AddClient copies")
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("# nothing\n"), 0o600))
	_, err := keys.Load(keys.Source{File: empty}, keys.Source{})
	assert.ErrorIs(t, err, keys.ErrNoKeys)
	_, err = keys.Load(keys.Source{File: filepath.Join(dir, "missing")}, keys.Source{})
	assert.Error(t, err)
	big := filepath.Join(dir, "big") // sparse
	require.NoError(t, os.WriteFile(big, nil, 0o600))
	require.NoError(t, os.Truncate(big, fileread.MaxSize+1))
	_, err = keys.Load(keys.Source{}, keys.Source{File: big, Name: "--admin-keys-file"})
	assert.ErrorIs(t, err, fileread.ErrTooLarge)
	assert.ErrorContains(t, err, "--admin-keys-file: keys: "+big+": ")
	for _, env := range []string{",", ",,", " , ", "\t"} {
		_, err = keys.Load(keys.Source{Env: env, Name: "RATEDB_API_KEYS"}, keys.Source{})
		assert.ErrorIs(t, err, keys.ErrNoKeys, "%q", env)
		_, err = keys.Load(keys.Source{}, keys.Source{Env: env, Name: "RATEDB_ADMIN_KEYS"})
		assert.ErrorIs(t, err, keys.ErrNoKeys, "%q", env)
	}
	k, err := keys.Load(keys.Source{}, keys.Source{})
	require.NoError(t, err)
	assert.False(t, k.HasClientKeys())
}
