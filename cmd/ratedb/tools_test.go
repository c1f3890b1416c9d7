package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ratedb/ratedb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInspectListsWhatWasCounted(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	s := start(t, db, append(longWindow, "--default-limit", "10")...)
	for range 3 {
		s.check("alice", "/api/v1/order")
	}
	s.check("bob", "/api/v1/order")

	// While the service runs, the tools refuse politely.
	_, stderr, code := runTool(t, "inspect", db)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "in use by a running ratedb")
	_, stderr, code = runTool(t, "compact", db)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "in use by a running ratedb")
	require.Equal(t, 0, s.stop(syscall.SIGTERM))

	out, stderr, code := runTool(t, "inspect", "--json", "--prefix", "default#0|5|alice|", db)
	require.Equal(t, 0, code, stderr)
	var got struct {
		Windows []struct {
			Key       string
			Algorithm string
			Scales    []string
			Counts    []int64
			Live      bool
		}
		Summary struct{ Records, Listed, Live int }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Len(t, got.Windows, 1)
	w := got.Windows[0]
	assert.Equal(t, "default#0|5|alice|/api/v1/order", w.Key)
	assert.Equal(t, "per_key", w.Algorithm)
	assert.Equal(t, []string{"1h0m0s"}, w.Scales)
	assert.Equal(t, []int64{3}, w.Counts)
	assert.True(t, w.Live)
	assert.Equal(t, 2, got.Summary.Records)
	assert.Equal(t, 1, got.Summary.Listed)

	out, _, code = runTool(t, "inspect", db)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "default#0|3|bob|/api/v1/order\tper_key\tscale=1h0m0s\tcount=1\t")
	assert.Contains(t, out, "summary: 2 records, 2 listed (2 live, 0 expired), 0 unreadable")

	_, stderr, code = runTool(t, "inspect", filepath.Join(t.TempDir(), "missing.db"))
	assert.Equal(t, 1, code)
	assert.NotEmpty(t, stderr)
}

func TestCompactShrinksExpiredWindows(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	// A file full of windows that ended long ago.
	past := time.Now().Add(-24 * time.Hour)
	db, err := ratedb.Open(path, &ratedb.Options{Clock: func() time.Time { return past }, MaxHotKeys: 1000, CleanPeriod: -1})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Minute)
	require.NoError(t, err)
	live, err := db.Window(ratedb.PerKeyWindow, 1000*time.Hour)
	require.NoError(t, err)
	ctx := context.Background()
	for i := range 20000 {
		_, err := w.Hit(ctx, fmt.Sprintf("expired-client-%06d|/api/v1/some/route", i), 10, 1)
		require.NoError(t, err)
	}
	_, err = live.Hit(ctx, "still-live", 10, 1)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before, err := os.Stat(path)
	require.NoError(t, err)

	out, stderr, code := runTool(t, "compact", path)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "removed 20000 expired windows")
	after, err := os.Stat(path)
	require.NoError(t, err)
	assert.Less(t, after.Size()*4, before.Size(), "%d -> %d bytes", before.Size(), after.Size())

	out, _, code = runTool(t, "inspect", path)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "summary: 1 records, 1 listed (1 live, 0 expired)")
	assert.True(t, strings.HasPrefix(out, "still-live\tper_key"), out)

	// The compacted file is a sound ratedb file.
	db, err = ratedb.Open(path, &ratedb.Options{MaxHotKeys: 1000})
	require.NoError(t, err)
	require.NoError(t, db.Verify())
	n, err := func() (int64, error) {
		l, err := db.Window(ratedb.PerKeyWindow, 1000*time.Hour)
		if err != nil {
			return 0, err
		}
		return l.Get(ctx, "still-live")
	}()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	require.NoError(t, db.Close())
}

// An operator who configured admin keys but no client key did not ask for
// a random development key that opens the check API: none is generated, a
// warning says that only the admin keys may check, and they can.
func TestAdminKeysOnlyGetNoDevKey(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	s := startEnv(t, db, []string{"RATEDB_API_KEYS=", "RATEDB_ADMIN_KEYS=" + adminKey}, "--log-format", "json")
	code, _, body := s.do("POST", "/v1/check", adminKey, `{"client_id":"c","route":"/r"}`)
	require.Equal(t, 200, code, "an admin key may check: %s", body)
	code, _, _ = s.do("POST", "/v1/check", clientKey, `{"client_id":"c","route":"/r"}`)
	assert.Equal(t, 401, code)
	require.Equal(t, 0, s.stop(syscall.SIGTERM))
	logs := s.stderr.String()
	assert.NotContains(t, logs, "X-API-Key:", "no development key printed")
	assert.NotContains(t, logs, "development")
	assert.Contains(t, logs, `"level":"WARN","msg":"no client API key configured (--api-keys-file or RATEDB_API_KEYS): only admin keys may call the check API"`)
}

func TestDevKeyAndLogs(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "s.db")
	s := startNoKeys(t, db, "--log-format", "json")
	out := s.stderr.String()
	i := strings.Index(out, "X-API-Key: ")
	require.True(t, i >= 0, out)
	key := strings.Fields(out[i+len("X-API-Key: "):])[0]
	assert.Contains(t, out, "development")
	code, _, body := s.do("POST", "/v1/check", key, `{"client_id":"secret-client","route":"/r"}`)
	require.Equal(t, 200, code, body)
	require.Equal(t, 0, s.stop(syscall.SIGTERM))
	logs := s.stderr.String()
	assert.Equal(t, 1, strings.Count(logs, key), "the key is printed once")
	assert.NotContains(t, logs, "secret-client", "client ids are not logged")
	assert.Contains(t, logs, `"msg":"listening"`, "JSON logs")
}

// inspect's text output shows a key as it is only if that cannot mislead:
// a key with a character a terminal acts on or hides (a C1 control such as
// U+009B, which starts an escape sequence; a bidi override), a tab, or a
// leading '"' is quoted in Go syntax. Clients choose their keys (a
// client_id, an Envoy descriptor value from a request header).
func TestInspectQuotesKeysThatCouldMislead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	keys := map[string]bool{ // key: printed as it is
		"plain key/ü":       true,
		"csi\u009b2Jgone":   false,
		"evil\u202etxt.exe": false,
		"esc\x1b[2J":        false,
		"tab\tcolumn":       false,
		`"quoted"`:          false,
		"nbsp\u00a0":        false,
	}
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	for k := range keys {
		_, err := w.Inc(context.Background(), k, 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	out, stderr, code := runTool(t, "inspect", path)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, len(keys)+1, out)
	var shown []string
	for _, l := range lines[:len(keys)] {
		shown = append(shown, strings.SplitN(l, "\tfixed\t", 2)[0])
	}
	for k, raw := range keys {
		want := k
		if !raw {
			want = strconv.Quote(k)
		}
		assert.Contains(t, shown, want, "key %q", k)
	}
	for _, r := range []string{"\u009b", "\u202e", "\x1b", "\u00a0"} {
		assert.NotContains(t, out, r)
	}
}

// inspect --json gives back every key exactly: JSON strings hold only
// UTF-8, and encoding/json writes U+FFFD for each invalid byte, so two
// keys that differ only there (an Envoy key holds its lengths as varints:
// a length of 128 or more is not UTF-8; a hashed one is raw SHA-256) read
// the same. Such a key's bytes are in key_bytes.
func TestInspectJSONKeepsKeysThatAreNotUTF8(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	keys := []string{"\x00envoy\x00\x80\x01a", "\x00envoy\x00\xff\x01a", "plain/ü"}
	db, err := ratedb.Open(path, &ratedb.Options{SnapshotPeriod: -1, CleanPeriod: -1})
	require.NoError(t, err)
	w, err := db.Window(ratedb.FixedWindow, time.Hour)
	require.NoError(t, err)
	for _, k := range keys {
		_, err := w.Inc(context.Background(), k, 1)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	out, stderr, code := runTool(t, "inspect", "--json", path)
	require.Equal(t, 0, code, stderr)
	var got struct {
		Windows []struct {
			Key      string `json:"key"`
			KeyBytes []byte `json:"key_bytes"`
		} `json:"windows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	var read []string
	for _, w := range got.Windows {
		k := w.Key
		if w.KeyBytes != nil {
			k = string(w.KeyBytes)
		} else {
			assert.True(t, utf8.ValidString(k), "%q", k)
		}
		read = append(read, k)
	}
	assert.ElementsMatch(t, keys, read)
	assert.Equal(t, 2, strings.Count(out, `"key_bytes"`), "only for keys that are not UTF-8")
}
