//go:build unix

package main_test

import (
	"bytes"
	"context"
	bin "encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/internal/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
)

// stateFile writes a state file of n live one-hour windows at path with
// the library, as a stopped service leaves it, and returns its size.
func stateFile(t *testing.T, path string, n int) int64 {
	t.Helper()
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	for i := range n {
		_, err := w.Hit(context.Background(), fmt.Sprintf("client-%06d", i), 100, 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// inspect reports a damaged or truncated file, and a path that is not a
// file, as an error: never a crash (Go's exit code 2 with a stack trace),
// never a hang.
func TestInspectDamagedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	stateFile(t, good, 20_000)
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	out, stderr, code := runTool(t, "inspect", good)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "summary: 20000 records")

	// Every page but the two meta pages overwritten: bbolt panics on the
	// first it reads.
	damaged := filepath.Join(dir, "damaged.db")
	d := append([]byte(nil), data...)
	for i := 2 * 4096; i < len(d); i++ {
		d[i] = 0xff
	}
	require.NoError(t, os.WriteFile(damaged, d, 0o600))
	// Only the meta pages left: bbolt's reads of the others fault.
	truncated := filepath.Join(dir, "truncated.db")
	require.NoError(t, os.WriteFile(truncated, data[:2*4096], 0o600))
	fifo := filepath.Join(dir, "fifo.db")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	for path, want := range map[string]string{damaged: "damaged", truncated: "", fifo: "not a regular file"} {
		_, stderr, code := runToolWithin(t, 30*time.Second, "inspect", path)
		assert.Equal(t, 1, code, "%s: %s", filepath.Base(path), stderr)
		assert.NotContains(t, stderr, "goroutine", "%s: a crash", filepath.Base(path))
		assert.Contains(t, stderr, want, filepath.Base(path))
	}
}

// compact gives the new file the old one's permissions and owner, and
// compacts the file a symbolic link points to, leaving the link.
func TestCompactKeepsOwnerModeAndLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real := filepath.Join(dir, "data", "state.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(real), 0o755))
	stateFile(t, real, 2_000)
	require.NoError(t, os.Chmod(real, 0o640))
	asRoot := os.Getuid() == 0
	if asRoot {
		// The service's own user, as a root operator compacts its file.
		require.NoError(t, os.Chown(real, 65534, 65534))
	}
	link := filepath.Join(dir, "state.db")
	require.NoError(t, os.Symlink(real, link))

	out, stderr, code := runTool(t, "compact", link)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "compacted")

	li, err := os.Lstat(link)
	require.NoError(t, err)
	assert.NotZero(t, li.Mode()&os.ModeSymlink, "the link is still a link")
	fi, err := os.Stat(real)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	if asRoot {
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, []uint32{65534, 65534}, []uint32{st.Uid, st.Gid}, "the owner is kept")
	}
	left, err := filepath.Glob(real + ".compact*")
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file left")
	out, stderr, code = runTool(t, "inspect", link)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "summary: 2000 records", "every window kept")
}

// inspect of an empty file says it is not a ratedb file (bbolt, opening it
// read-only, failed to write a new database into it).
func TestInspectEmptyFile(t *testing.T) {
	t.Parallel()
	empty := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, stderr, code := runTool(t, "inspect", empty)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "an empty file")
	assert.NotContains(t, stderr, "bad file descriptor")
}

// damageBlocks flips a byte in the middle of every third block of windows
// of the state file at path, so that each fails its checksum.
func damageBlocks(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(layout.BucketBlocks)
		var keys [][]byte
		require.NoError(t, b.ForEach(func(k, _ []byte) error {
			keys = append(keys, append([]byte(nil), k...))
			return nil
		}))
		for i := 0; i < len(keys); i += 3 {
			v := append([]byte(nil), b.Get(keys[i])...)
			v[len(v)/2] ^= 0xff
			if err := b.Put(keys[i], v); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
}

// compact drops the damaged blocks of a file, as serve's janitor would, and
// says so, with their number (inspect's unreadable count): the windows they
// held are gone from the new file, which must not happen silently.
func TestCompactReportsDamagedBlocks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	stateFile(t, path, 5_000)
	damageBlocks(t, path)
	unreadable := regexp.MustCompile(`(\d+) unreadable`)

	out, stderr, code := runTool(t, "inspect", path)
	require.Equal(t, 0, code, stderr)
	m := unreadable.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	damaged, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.Positive(t, damaged, "the file has damaged blocks")

	out, stderr, code = runTool(t, "compact", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, fmt.Sprintf("removed 0 expired windows, dropped %d damaged blocks, ", damaged))
	// Blocks that fail their checksum are dropped without a rebuild: no
	// damaged copy is kept, and none is named.
	kept, err := filepath.Glob(path + ".corrupt-*")
	require.NoError(t, err)
	assert.Empty(t, kept)
	assert.NotContains(t, stderr, "kept as")
	assert.Contains(t, stderr, fmt.Sprintf("warning: %s was damaged: %d damaged blocks were dropped, and with them %d windows; ", path, damaged, 5_000-listed(t, path)))

	out, stderr, code = runTool(t, "inspect", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, ", 0 unreadable", "compact dropped the damaged blocks")

	// A sound file: nothing dropped, nothing on stderr.
	out, stderr, code = runTool(t, "compact", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "removed 0 expired windows, dropped 0 damaged blocks, ")
	assert.Empty(t, stderr)
}

// listed runs inspect on path and returns the number of windows it lists.
func listed(t *testing.T, path string) int {
	t.Helper()
	out, stderr, code := runTool(t, "inspect", path)
	require.Equal(t, 0, code, stderr)
	m := regexp.MustCompile(`(\d+) listed`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// compact says how many windows the damage it drops took with it, not only
// how many damaged blocks and pages it dropped: one damaged page of the
// blocks' tree counts once and can hold every window of the file (here the
// tree's root, a branch page: all 20,000 live windows; or one leaf page,
// about a hundred). The number is the file's own window count less those
// kept (and those removed as expired), so it holds for windows no reader
// could see.
func TestCompactSaysHowManyWindowsDamageTook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		page func(root uint64, branch []byte) uint64 // the page to zero
	}{
		{"root branch page", func(root uint64, _ []byte) uint64 { return root }},
		{"one leaf page", func(_ uint64, branch []byte) uint64 {
			n := int(bin.LittleEndian.Uint16(branch[10:]))
			return bin.LittleEndian.Uint64(branch[16+(n/2)*16+8:]) // the middle child
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "state.db")
			stateFile(t, path, 20_000)
			db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
			require.NoError(t, err)
			var root uint64
			var ps int
			require.NoError(t, db.View(func(tx *bolt.Tx) error {
				root, ps = uint64(tx.Bucket(layout.BucketBlocks).Root()), tx.DB().Info().PageSize
				return nil
			}))
			require.NoError(t, db.Close())
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			branch := make([]byte, ps)
			_, err = f.ReadAt(branch, int64(root)*int64(ps))
			require.NoError(t, err)
			require.Equal(t, uint16(0x01), bin.LittleEndian.Uint16(branch[8:]), "the blocks' root is a branch page")
			_, err = f.WriteAt(make([]byte, ps), int64(tc.page(root, branch))*int64(ps))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			damaged, err := os.ReadFile(path)
			require.NoError(t, err)

			out, stderr, code := runTool(t, "compact", path)
			require.Equal(t, 0, code, stderr)
			assert.Contains(t, out, "removed 0 expired windows, dropped 1 damaged blocks, ")
			// ratedb rebuilt the file around the damaged page and kept
			// the damaged file, as it was, beside it: compact says where
			// (README, compact -h) and leaves it.
			kept, err := filepath.Glob(path + ".corrupt-*")
			require.NoError(t, err)
			require.Len(t, kept, 1, "the damaged file is kept beside it")
			assert.Contains(t, stderr, "ratedb compact: the damaged file was kept as "+kept[0]+" ")
			b, err := os.ReadFile(kept[0])
			require.NoError(t, err)
			assert.True(t, bytes.Equal(damaged, b), "the copy is the damaged file as it was")
			lost := 20_000 - listed(t, path)
			require.Positive(t, lost)
			assert.Contains(t, stderr, fmt.Sprintf("warning: %s was damaged: 1 damaged blocks were dropped, and with them %d windows; ", path, lost))
			if tc.name == "root branch page" {
				assert.Equal(t, 20_000, lost, "every window was under the root")
			}
		})
	}
}

// inspect of a file it may not read (an operator's own user on the
// service's 0600 file) says so, exit status 1, and does not call it "not a
// ratedb file of a known format": the file is one, it could not be opened.
// As root, which reads any file, the command runs as nobody.
func TestInspectUnreadableFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	stateFile(t, path, 10)
	require.NoError(t, os.Chmod(path, 0o200))
	cmd := exec.Command(binary(t), "inspect", path)
	if os.Getuid() == 0 {
		// nobody must reach the file and the binary.
		require.NoError(t, os.Chmod(dir, 0o755))
		require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
		b, err := os.ReadFile(binary(t))
		require.NoError(t, err)
		bin := filepath.Join(dir, "ratedb")
		require.NoError(t, os.WriteFile(bin, b, 0o755))
		nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		// A temporary directory nobody cannot reach (a TMPDIR under a
		// private home) or a noexec mount leaves nothing to test here.
		probe := exec.Command(bin, "version")
		probe.SysProcAttr = nobody
		if out, err := probe.CombinedOutput(); err != nil {
			t.Skipf("cannot run the binary as nobody here: %v: %s", err, out)
		}
		cmd = exec.Command(bin, "inspect", path)
		cmd.SysProcAttr = nobody
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, stderr.String())
	assert.Equal(t, 1, ee.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "ratedb inspect: open "+path+": permission denied")
	assert.NotContains(t, stderr.String(), "not a ratedb file")
	assert.NotContains(t, stderr.String(), "not a readable ratedb file")
}

// compact and version fail (exit status 1) when their output cannot be
// written, as inspect does: a script that keeps compact's summary on a full
// disk got exit status 0 and no summary. compact says the file was compacted
// all the same. /dev/full answers every write with ENOSPC.
func TestToolsReportAnUnwritableOutput(t *testing.T) {
	t.Parallel()
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	path := filepath.Join(t.TempDir(), "state.db")
	stateFile(t, path, 10)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compact", path}, "ratedb compact: " + path + " was compacted, but its summary could not be written: "},
		{[]string{"version"}, "ratedb version: "},
		{[]string{"inspect", path}, "ratedb inspect: "},
	} {
		cmd := exec.Command(binary(t), tc.args...)
		cmd.Stdout = full
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v: %s", tc.args, stderr.String())
		assert.Equal(t, 1, ee.ExitCode(), "%v: %s", tc.args, stderr.String())
		assert.Contains(t, stderr.String(), tc.want, "%v", tc.args)
		assert.Contains(t, stderr.String(), "no space left on device", "%v", tc.args)
	}
	assert.Equal(t, 10, listed(t, path), "the file was compacted, every window kept")
}
