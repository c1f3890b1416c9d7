package grpcapi_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
)

func TestTLSConfigErrors(t *testing.T) {
	conf, err := grpcapi.TLSConfig("", "", "")
	require.NoError(t, err)
	assert.Nil(t, conf, "no files: plaintext")

	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate"), 0o600))
	cases := []struct{ name, cert, key, ca string }{
		{"client CA without a server certificate", "", "", junk},
		{"certificate without key", junk, "", ""},
		{"key without certificate", "", junk, ""},
		{"unparsable pair", junk, junk, ""},
		{"missing files", filepath.Join(dir, "nope.pem"), filepath.Join(dir, "nope.key"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := grpcapi.TLSConfig(tc.cert, tc.key, tc.ca)
			assert.ErrorIs(t, err, grpcapi.ErrTLSConfig)
		})
	}
}
