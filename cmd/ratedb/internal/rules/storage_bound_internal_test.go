package rules

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/fileread"
)

// loadWithin runs Load on s and fails the test if it has not returned
// within 20 s (a read of a named pipe nothing writes to blocks): it then
// opens path for writing and closes it, so that the blocked read ends.
func loadWithin(t *testing.T, s FileStorage, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := s.Load()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatalf("Load of %s blocked", path)
		return nil
	}
}

// The rules file is read as the files of the flags are: a named pipe or a
// device (even through a symbolic link) is refused at once, saying what it
// is, and a file larger than MaxFileSize is refused without being read,
// naming the file and the bound (it was read whole with os.ReadFile: a
// named pipe blocked the start, /dev/zero filled the memory).
func TestLoadRefusesSpecialAndOversizedFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.rules.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	err := loadWithin(t, FileStorage{Path: fifo}, fifo)
	require.ErrorIs(t, err, fileread.ErrNotRegular)
	assert.Equal(t, "rules: reading the rules file: "+fifo+": fileread: not a regular file: it is a named pipe (FIFO)", err.Error())

	link := filepath.Join(dir, "dev.rules.json")
	require.NoError(t, os.Symlink("/dev/null", link))
	err = loadWithin(t, FileStorage{Path: link}, link)
	require.ErrorIs(t, err, fileread.ErrNotRegular)
	assert.Equal(t, "rules: reading the rules file: "+link+": fileread: not a regular file: it is a character device", err.Error())

	big := filepath.Join(dir, "big.rules.json")
	require.NoError(t, os.WriteFile(big, nil, 0o600))
	require.NoError(t, os.Truncate(big, MaxFileSize+1)) // sparse
	_, err = FileStorage{Path: big}.Load()
	require.ErrorIs(t, err, fileread.ErrTooLarge)
	assert.Equal(t, "rules: reading the rules file: "+big+": fileread: file larger than 256 MiB (268435456 bytes)", err.Error())

	rs, err := FileStorage{Path: filepath.Join(dir, "none.rules.json")}.Load()
	require.NoError(t, err, "no file is no rules")
	assert.Empty(t, rs)
}

// Save never writes a file Load would refuse: rules that would take more
// than the bound are not saved, the file and the rules served stay as they
// were, and a file of exactly the bound is written and read back.
func TestSaveRefusesRulesLargerThanTheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	def, err := Build(DefaultName, Spec{ClientID: "*", Route: "*", Limit: ptr(int64(100)), Window: "1m"}, true)
	require.NoError(t, err)
	r0, err := Build("r0", Spec{ClientID: "c0", Route: "*", Limit: ptr(int64(1)), Window: "1m"}, false)
	require.NoError(t, err)
	// The bound: the file of r0 alone, to the byte.
	m, err := NewManager(FileStorage{Path: path}, def)
	require.NoError(t, err)
	_, err = m.Put(r0)
	require.NoError(t, err)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	store := FileStorage{Path: path, maxSize: len(before)}

	m, err = NewManager(store, def)
	require.NoError(t, err, "a file of exactly the bound is read")
	_, err = m.Put(r0)
	require.NoError(t, err, "a file of exactly the bound is written")
	r1, err := Build("r1", Spec{ClientID: "c1", Route: "*", Limit: ptr(int64(1)), Window: "1m"}, false)
	require.NoError(t, err)
	_, err = m.Put(r1)
	require.ErrorIs(t, err, ErrRulesFileFull)
	assert.Regexp(t, `^rules: saving 2 rules \(\d+ bytes\): rules: the stored rules would be larger than their bound`, err.Error())
	_, ok := m.Current().Get("r1")
	assert.False(t, ok, "the rule refused is not served")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the file is as it was")
	m2, err := NewManager(store, def)
	require.NoError(t, err, "the next start reads the file")
	assert.Len(t, m2.Current().Rules(), 1)
	assert.Contains(t, ErrRulesFileFull.Error(), fmt.Sprintf("%d MiB (%d bytes)", MaxFileSize>>20, MaxFileSize), "the message states MaxFileSize")
}

// The sizes MaxFileSize's comment is built on: a rule as usually written
// takes about 240 bytes, the largest about 7.9 KiB, and a rule of a --rules
// file takes at most about six times its size once stored, so a --rules file
// of fileread.MaxSize bytes, stored, fits in well under half the bound.
func TestMaxFileSizeHoldsALegalRulesFile(t *testing.T) {
	gen := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC).UnixMicro()
	stored := func(t *testing.T, s Spec) int {
		t.Helper()
		r, err := Build(s.Name, s, false)
		require.NoError(t, err)
		one, err := json.MarshalIndent(fileFormat{Version: 1, Rules: []Stored{{Spec: r.Spec(), Generation: gen}}}, "", "  ")
		require.NoError(t, err)
		two, err := json.MarshalIndent(fileFormat{Version: 1, Rules: []Stored{{Spec: r.Spec(), Generation: gen}, {Spec: r.Spec(), Generation: gen}}}, "", "  ")
		require.NoError(t, err)
		return len(two) - len(one)
	}
	usual := stored(t, Spec{Name: "customer-000123", ClientID: "customer-000123", Route: "/api/v1/orders/*", Limit: ptr(int64(1000)), Window: "1m"})
	assert.InDelta(t, 240, usual, 20)

	var tiers []TierSpec
	for i := range MaxTiers {
		tiers = append(tiers, TierSpec{Limit: ptr(int64(MaxLimit)), Window: (MaxWindow - time.Duration(i+1)*(time.Hour+time.Minute+time.Second+time.Millisecond)).String()})
	}
	largest := stored(t, Spec{Name: strings.Repeat("n", MaxNameLen), ClientID: strings.Repeat("<", MaxPatternLen),
		Route: strings.Repeat(">", MaxPatternLen), Algorithm: "staggered", Tiers: tiers})
	assert.InDelta(t, 7.9*1024, largest, 200)
	assert.Greater(t, MaxFileSize/largest, 33_000)

	// The YAML rules that grow the most once stored: written as short as
	// YAML allows, with patterns of a character JSON escapes to six bytes.
	// Each adds to a --rules file, and to the file stored, what the second
	// of two such rules adds to the first.
	for _, pattern := range []string{"<", strings.Repeat("<", MaxPatternLen)} {
		rule := func(name string) string {
			return "{name: " + name + ",client_id: " + pattern + ",route: " + pattern + ",limit: 0,window: 1h}"
		}
		file := func(t *testing.T, yaml string) (yamlLen, storedLen int) {
			t.Helper()
			rs, err := ParseFile([]byte(yaml))
			require.NoError(t, err)
			var st []Stored
			for _, r := range rs {
				st = append(st, Stored{Spec: r.Spec(), Generation: gen})
			}
			b, err := json.MarshalIndent(fileFormat{Version: 1, Rules: st}, "", "  ")
			require.NoError(t, err)
			return len(yaml), len(b)
		}
		y1, s1 := file(t, "rules: ["+rule("a")+"]")
		y2, s2 := file(t, "rules: ["+rule("a")+","+rule("b")+"]")
		growth := float64(s2-s1) / float64(y2-y1)
		assert.Less(t, growth, 6.0, "%d-byte patterns", len(pattern))
		assert.Less(t, growth*fileread.MaxSize, 100.0*(1<<20), "a --rules file stored takes under 100 MiB")
		assert.Less(t, growth*fileread.MaxSize, float64(MaxFileSize)/2)
	}
}

func ptr[T any](v T) *T { return &v }
