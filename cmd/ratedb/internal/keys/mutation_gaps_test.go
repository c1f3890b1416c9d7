package keys_test

// Tests added after mutation testing (TestGap...): each fails with one
// deliberate bug that the rest of the package's tests let through.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
)

// A key of MaxKeyLen bytes loads; one byte longer is refused, and the
// error does not show the key.
func TestGapLoadAcceptsAKeyOfMaxKeyLen(t *testing.T) {
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
func TestGapRoleOfAKeyOfMaxKeyLen(t *testing.T) {
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
func TestGapKeyInBothListsIsAdmin(t *testing.T) {
	k, err := keys.Load(keys.Source{Env: "c1,both"}, keys.Source{Env: "both,a1"})
	require.NoError(t, err)
	assert.Equal(t, keys.Admin, k.Role("both"))
	assert.Equal(t, keys.Admin, k.AddClient("a1").Role("a1"))
	assert.Equal(t, keys.Client, k.Role("c1"))
}
