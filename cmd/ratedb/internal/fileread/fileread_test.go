package fileread_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/fileread"
)

// sparse returns the path of a file of size zero bytes, sparse: it takes
// no disk space.
func sparse(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	require.NoError(t, os.Truncate(p, size))
	return p
}

func TestReadFileBound(t *testing.T) {
	b, err := fileread.ReadFile(sparse(t, fileread.MaxSize))
	require.NoError(t, err, "a file of MaxSize bytes is read")
	assert.Len(t, b, fileread.MaxSize)

	big := sparse(t, fileread.MaxSize+1)
	_, err = fileread.ReadFile(big)
	require.ErrorIs(t, err, fileread.ErrTooLarge)
	assert.Equal(t, big+": fileread: file larger than 16 MiB (16777216 bytes)", err.Error())
	assert.Contains(t, fileread.ErrTooLarge.Error(), strconv.Itoa(fileread.MaxSize), "the message states MaxSize")

	_, err = fileread.ReadFile(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = fileread.ReadFile(t.TempDir())
	assert.ErrorContains(t, err, "is a directory")
}

// ReadFileLimit bounds a file at its own limit, and its error states that
// limit (not MaxSize's) while matching ErrTooLarge.
func TestReadFileLimit(t *testing.T) {
	const limit = 3 << 20
	b, err := fileread.ReadFileLimit(sparse(t, limit), limit)
	require.NoError(t, err, "a file of limit bytes is read")
	assert.Len(t, b, limit)

	big := sparse(t, limit+1)
	_, err = fileread.ReadFileLimit(big, limit)
	require.ErrorIs(t, err, fileread.ErrTooLarge)
	assert.Equal(t, big+": fileread: file larger than 3 MiB (3145728 bytes)", err.Error())

	odd := sparse(t, 1001)
	_, err = fileread.ReadFileLimit(odd, 1000)
	require.ErrorIs(t, err, fileread.ErrTooLarge)
	assert.Equal(t, odd+": fileread: file larger than 1000 bytes", err.Error())

	b, err = fileread.ReadFileLimit(sparse(t, fileread.MaxSize+1), fileread.MaxSize+1)
	require.NoError(t, err, "a limit above MaxSize reads more than ReadFile")
	assert.Len(t, b, fileread.MaxSize+1)
}
