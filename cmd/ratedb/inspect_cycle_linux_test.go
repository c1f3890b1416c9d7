package main_test

import (
	"bytes"
	"context"
	ebin "encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// blocksRootBranch returns the page id of the root page of the blocks bucket
// in the bbolt file data (page size 4096), which must be a branch page.
func blocksRootBranch(t *testing.T, data []byte) uint64 {
	t.Helper()
	le := ebin.LittleEndian
	const ps = 4096
	var root, txid uint64
	for m := 0; m < 2; m++ {
		meta := data[m*ps+16:]
		if tx := le.Uint64(meta[48:]); tx >= txid {
			txid, root = tx, le.Uint64(meta[16:])
		}
	}
	page := data[root*ps:]
	for i := range int(le.Uint16(page[10:])) {
		e := page[16+16*i:]
		pos, ksize := le.Uint32(e[4:]), le.Uint32(e[8:])
		start := 16 + 16*i + int(pos)
		if string(page[start:start+int(ksize)]) == "blocks" {
			id := le.Uint64(page[start+int(ksize):])
			require.Equal(t, uint16(0x01), le.Uint16(data[id*ps+8:]), "blocks root is a branch page")
			return id
		}
	}
	t.Fatal("no blocks bucket")
	return 0
}

// inspect on a file whose blocks bucket has a branch page pointing at
// itself (damage to one child id) ends with an error, instead of walking the
// cycle until it runs out of memory. The tool runs with 3 GiB of address
// space so that a runaway would not take the machine's memory.
func TestInspectCyclicBranch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cycle.db")
	stateFile(t, path, 20_000)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	id := blocksRootBranch(t, data)
	ebin.LittleEndian.PutUint64(data[id*4096+16+16*1+8:], id) // element 1's child: itself
	require.NoError(t, os.WriteFile(path, data, 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `ulimit -v 3145728; exec "$0" inspect "$1"`, binary(t), path)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err = cmd.Run()
	require.NoError(t, ctx.Err(), "inspect did not finish within 30 s")
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	se := stderr.String()
	if len(se) > 600 {
		se = se[:600]
	}
	require.Equal(t, 1, code, "inspect exit code; stderr: %s", se)
	require.NotContains(t, se, "goroutine", "a crash")
	require.Contains(t, se, "damaged")
}
