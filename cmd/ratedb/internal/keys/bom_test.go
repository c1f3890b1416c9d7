package keys_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A key file saved with a UTF-8 byte order mark (Windows editors add one):
// its first line is a comment, and must stay one. With the BOM kept, the
// line "\ufeff# ops admin keys" was loaded as an admin key, and a first line
// holding a key never matched that key.
func TestKeyFileWithByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	admin := filepath.Join(dir, "admin")
	require.NoError(t, os.WriteFile(admin, []byte("\ufeff# ops admin keys\nadm1\n"), 0o600))
	client := filepath.Join(dir, "client")
	require.NoError(t, os.WriteFile(client, []byte("\ufeffcli1\ncli2\n"), 0o600))
	k, err := keys.Load(keys.Source{File: client}, keys.Source{File: admin})
	require.NoError(t, err)
	assert.Equal(t, keys.None, k.Role("\ufeff# ops admin keys"), "a comment is not a key")
	assert.Equal(t, keys.Admin, k.Role("adm1"))
	assert.Equal(t, keys.Client, k.Role("cli1"), "the first line's key")
}
