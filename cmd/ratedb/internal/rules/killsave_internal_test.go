package rules

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const killSaveEnv = "RATEDB_RULES_KILL_SAVE"

// killSaveRules are the rules the parent stores and the rules the child's
// save, killed before its rename, would have replaced them with.
func killSaveRules(n int) []Stored {
	limit := int64(10)
	rs := make([]Stored, n)
	for i := range rs {
		rs[i] = Stored{Spec: Spec{Name: "rule-" + strings.Repeat("x", i), ClientID: "*", Route: "*", Limit: &limit, Window: "1m"}, Generation: int64(i + 1)}
	}
	return rs
}

// TestKillSaveChild is the child half of TestKilledSaveKeepsTheRulesAndIsCleanedUp:
// it saves new rules to the file its environment names and, once the
// temporary file is written and synced, says so and waits for the parent
// to kill it before the rename.
func TestKillSaveChild(t *testing.T) {
	path := os.Getenv(killSaveEnv)
	if path == "" {
		t.Skip("run by TestKilledSaveKeepsTheRulesAndIsCleanedUp")
	}
	testBeforeRename = func(tmp string) {
		os.Stdout.WriteString("renaming " + tmp + "\n")
		_, _ = io.Copy(io.Discard, os.Stdin) // until the kill
		os.Exit(2)                           // the parent went away
	}
	_ = FileStorage{Path: path}.Save(killSaveRules(5))
	os.Exit(3) // not reached: the hook runs first
}

// TestKilledSaveKeepsTheRulesAndIsCleanedUp kills (SIGKILL) a process in
// the middle of a save of the rules file, after it wrote and synced its
// temporary file and before the rename: the rules file still holds the old
// rules, whole, and the temporary file is left behind. RemoveLeftovers,
// which the service runs at start, removes it (before it, nothing did: a
// full-size file, up to MaxFileSize, for each save cut short) and nothing
// else: not the rules file, not an operator's file of a similar name, not
// the temporary files of another rules file in the same directory.
func TestKilledSaveKeepsTheRulesAndIsCleanedUp(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ratedb.db.rules.json")
	store := FileStorage{Path: path}
	require.NoError(t, store.Save(killSaveRules(2)))

	cmd := exec.Command(os.Args[0], "-test.run=^TestKillSaveChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killSaveEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var tmp string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "renaming "); ok {
			tmp = rest
			break
		}
	}
	require.NotEmpty(t, tmp, "the child reached the rename")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = io.Copy(io.Discard, out)
	_ = cmd.Wait()

	got, err := store.Load()
	require.NoError(t, err, "the rules file is whole after the kill")
	assert.Equal(t, killSaveRules(2), got, "the rules file holds the old rules")
	_, err = os.Stat(tmp)
	require.NoError(t, err, "the kill left the temporary file")
	require.Equal(t, filepath.Dir(path), filepath.Dir(tmp))

	keep := []string{
		path + ".tmp-old", // an operator's
		path + ".tmp",     // no digits: not Save's
		filepath.Join(dir, "other.db.rules.json.tmp123456"), // another rules file's
	}
	for _, p := range keep {
		require.NoError(t, os.WriteFile(p, []byte("kept"), 0o600))
	}
	assert.Equal(t, 1, store.RemoveLeftovers())
	_, err = os.Stat(tmp)
	assert.ErrorIs(t, err, os.ErrNotExist, "the temporary file of the save cut short is removed")
	for _, p := range keep {
		_, err := os.Stat(p)
		assert.NoError(t, err, "%s is kept", filepath.Base(p))
	}
	got, err = store.Load()
	require.NoError(t, err)
	assert.Equal(t, killSaveRules(2), got)
	assert.Zero(t, store.RemoveLeftovers(), "nothing more to remove")
}
