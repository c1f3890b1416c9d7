package keys_test

import (
	"os"
	"path/filepath"
	"strings"
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

// A key holding a control character other than a tab can never be sent in
// an X-API-Key header (net/http refuses the request): Load refuses it,
// naming the file's line and never the key. A tab inside a key, a space
// and non-ASCII bytes can be sent, and load.
func TestKeysHeadersCannotCarryAreRefused(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []byte{0x00, '\r', 0x1b, 0x1f, 0x7f} {
		f := filepath.Join(dir, "bad")
		require.NoError(t, os.WriteFile(f, []byte("# keys\nok-key\nSECRET"+string(c)+"x\n"), 0o600))
		_, err := keys.Load(keys.Source{File: f}, keys.Source{})
		require.Error(t, err, "%#x", c)
		assert.Contains(t, err.Error(), "line 3 of the file "+f+" holds a control character", "%#x", c)
		assert.NotContains(t, err.Error(), "SECRET")
		_, err = keys.Load(keys.Source{}, keys.Source{Env: "ok-key,SECRET" + string(c) + "x"})
		require.Error(t, err, "%#x", c)
		assert.NotContains(t, err.Error(), "SECRET")
	}
	k, err := keys.Load(keys.Source{Env: "tab\tinside, spa ce"}, keys.Source{Env: "clé\x80"})
	require.NoError(t, err)
	assert.Equal(t, keys.Client, k.Role("tab\tinside"))
	assert.Equal(t, keys.Client, k.Role("spa ce"))
	assert.Equal(t, keys.Admin, k.Role("clé\x80"))
}

// A comment after a key on its line ("abc #prod") was part of the key, so
// the key sent never matched: Load refuses the line, naming it and never
// the key. A '#' not after a space or a tab, and a space without a '#',
// stay part of a key.
func TestInlineCommentInKeyFileRefused(t *testing.T) {
	dir := t.TempDir()
	for name, line := range map[string]string{"space": "SECRET-key #prod", "spaces": "SECRET-key   # prod", "tab": "SECRET-key\t#prod"} {
		f := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(f, []byte("# keys\nok-key\n"+line+"\n"), 0o600))
		_, err := keys.Load(keys.Source{}, keys.Source{File: f, Name: "--admin-keys-file"})
		require.Error(t, err, name)
		assert.Equal(t, "--admin-keys-file: keys: line 3 of the file "+f+" holds a '#' after a space or a tab: a comment must be on a line of its own, starting with '#' (it would be part of the key)", err.Error())
		assert.NotContains(t, err.Error(), "SECRET")
		assert.NotContains(t, err.Error(), "prod")
	}
	f := filepath.Join(dir, "good")
	require.NoError(t, os.WriteFile(f, []byte("  # a comment, indented\nhash#inside\nspa ce\n"), 0o600))
	k, err := keys.Load(keys.Source{File: f}, keys.Source{})
	require.NoError(t, err)
	assert.Equal(t, keys.Client, k.Role("hash#inside"))
	assert.Equal(t, keys.Client, k.Role("spa ce"))
}

// A key of MaxKeyLen bytes loads; one byte longer is refused, and the
// error does not show the key.
func TestLoadAcceptsAKeyOfMaxKeyLen(t *testing.T) {
	key := "s3cr3t" + strings.Repeat("k", keys.MaxKeyLen-len("s3cr3t"))
	k, err := keys.Load(keys.Source{Env: key}, keys.Source{Env: key})
	require.NoError(t, err)
	assert.True(t, k.HasClientKeys())
	assert.True(t, k.HasAdminKeys())

	_, err = keys.Load(keys.Source{Env: key + "k"}, keys.Source{})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3t")
}

// Role knows a configured key of MaxKeyLen bytes; a presented key one byte
// longer is unknown without being compared.
func TestRoleOfAKeyOfMaxKeyLen(t *testing.T) {
	client := strings.Repeat("c", keys.MaxKeyLen)
	admin := strings.Repeat("a", keys.MaxKeyLen)
	k, err := keys.Load(keys.Source{Env: client}, keys.Source{Env: admin})
	require.NoError(t, err)
	assert.Equal(t, keys.Client, k.Role(client))
	assert.Equal(t, keys.Admin, k.Role(admin))
	assert.Equal(t, keys.None, k.Role(client+"c"))
	assert.Equal(t, keys.None, k.Role(admin+"a"))
}

// A key configured both as a client and as an admin key is an admin key:
// listing it among the client keys too takes nothing from it.
func TestKeyInBothListsIsAdmin(t *testing.T) {
	k, err := keys.Load(keys.Source{Env: "c1,both"}, keys.Source{Env: "both,a1"})
	require.NoError(t, err)
	assert.Equal(t, keys.Admin, k.Role("both"))
	assert.Equal(t, keys.Admin, k.AddClient("a1").Role("a1"))
	assert.Equal(t, keys.Client, k.Role("c1"))
}
