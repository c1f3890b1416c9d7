package main_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tiersJSON returns n tiers, the i-th (from 1) of i hours with a limit of
// i+2: the first binds.
func tiersJSON(n int) string {
	t := make([]string, n)
	for i := range t {
		t[i] = fmt.Sprintf(`{"limit":%d,"window":"%dh"}`, i+3, i+1)
	}
	return "[" + strings.Join(t, ",") + "]"
}

// A rule of exactly 16 tiers, the most a rule may have, is served end to
// end: from a --rules file and through PUT, with the file and with Redis,
// each tier reported, the first binding, the counts kept across a restart;
// a rule of 17 is refused with its count, at start and by PUT (400). Rules
// of more than 16 tiers have only their first 16 checked (de19021): this
// guards the boundary itself.
func TestSixteenTiersEndToEnd(t *testing.T) {
	t.Parallel()
	addr, _ := proctest.StartRedis(t)
	dir := t.TempDir()
	rule := func(name, client string, n int) string {
		return fmt.Sprintf(`{"name":%q,"client_id":%q,"route":"*","algorithm":"per_key","tiers":%s}`, name, client, tiersJSON(n))
	}
	file := filepath.Join(dir, "rules.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"rules":[`+rule("file16", "file", 16)+`]}`), 0o600))
	file17 := filepath.Join(dir, "rules17.json")
	require.NoError(t, os.WriteFile(file17, []byte(`{"rules":[`+rule("file17", "file", 17)+`]}`), 0o600))
	for name, store := range map[string][]string{
		"file":  nil,
		"redis": {"--redis", "redis://" + addr + "/0", "--redis-timeout", "5s"},
	} {
		t.Run(name, func(t *testing.T) {
			db := ""
			if store == nil {
				db = filepath.Join(t.TempDir(), "r.db")
			}
			_, stderr, code := runTool(t, append(append([]string{"serve", "--http", "127.0.0.1:0", "--rules", file17}, dbArgs(db)...), store...)...)
			assert.Equal(t, 1, code)
			assert.Contains(t, stderr, "17 tiers, at most 16")

			args := append([]string{"--rules", file}, store...)
			s := start(t, db, args...)
			code, _, body := s.do("PUT", "/v1/rules/api16", adminKey, `{"client_id":"api","route":"*","algorithm":"per_key","tiers":`+tiersJSON(16)+`}`)
			require.Equal(t, http.StatusCreated, code, body)
			code, _, body = s.do("PUT", "/v1/rules/api17", adminKey, `{"client_id":"api17","route":"*","algorithm":"per_key","tiers":`+tiersJSON(17)+`}`)
			assert.Equal(t, http.StatusBadRequest, code, body)
			assert.Contains(t, body, "17 tiers, at most 16")
			for _, client := range []string{"file", "api"} {
				for i := 1; i <= 3; i++ {
					d := s.check(client, "/r")
					require.Equal(t, "Allow", d.Status, "%s hit %d", client, i)
					require.Len(t, d.Tiers, 16)
					for j, tier := range d.Tiers {
						assert.Equal(t, int64(j+3), tier.Limit)
						assert.Equal(t, int64(j+3-i), tier.Remain, "%s hit %d tier %d", client, i, j)
					}
				}
			}
			require.Equal(t, 0, s.stop(syscall.SIGTERM))
			s = start(t, db, args...)
			for _, client := range []string{"file", "api"} {
				d := s.check(client, "/r")
				assert.Equal(t, "Deny", d.Status, "%s: the first tier's 3 hits survive the restart", client)
				if assert.Len(t, d.Tiers, 16) {
					assert.Equal(t, int64(15), d.Tiers[15].Remain, "%s: the denied hit is counted in no tier", client)
				}
			}
		})
	}
}

// dbArgs is --db db, or nothing for "" (a Redis store).
func dbArgs(db string) []string {
	if db == "" {
		return nil
	}
	return []string{"--db", db}
}
