package main_test

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"testing"

	"github.com/ratedb/ratedb/internal/fixture"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inspect names the file's format: a ratedb/1 file (which serve and compact
// migrate when they open it) is read as it is, left unchanged, and said to
// be one; compact migrates it (and removes its windows, which all ended in
// January 2026), and inspect then reads a ratedb/2 file.
func TestInspectNamesTheFormat(t *testing.T) {
	t.Parallel()
	path := fixture.Format1(t)
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	out, stderr, code := runTool(t, "inspect", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "summary: 40 records, 40 listed (0 live, 40 expired), 0 unreadable; format ratedb/1 (ratedb migrates it")
	windows, format := inspectJSON(t, path)
	assert.Equal(t, 40, windows)
	assert.Equal(t, "ratedb/1", format)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, sha256.Sum256(before), sha256.Sum256(after), "inspect changed the file")

	out, stderr, code = runTool(t, "compact", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "removed 40 expired windows")
	out, stderr, code = runTool(t, "inspect", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "unreadable; format ratedb/2\n")
	assert.NotContains(t, out, "migrates")
	windows, format = inspectJSON(t, path)
	assert.Equal(t, 0, windows)
	assert.Equal(t, "ratedb/2", format)
}

// inspectJSON runs inspect --json on path and returns the number of windows
// and the format it reports.
func inspectJSON(t *testing.T, path string) (windows int, format string) {
	t.Helper()
	js, stderr, code := runTool(t, "inspect", "--json", path)
	require.Equal(t, 0, code, stderr)
	var got struct {
		Windows []json.RawMessage
		Summary struct{ Format string }
	}
	require.NoError(t, json.Unmarshal([]byte(js), &got))
	return len(got.Windows), got.Summary.Format
}
