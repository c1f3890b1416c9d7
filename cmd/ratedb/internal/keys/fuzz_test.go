package keys_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/keys"
)

// FuzzLoad feeds Load arbitrary keys files (--api-keys-file) and
// environment values: it never panics; a source it accepts gives exactly
// the keys its documented format holds (every one has its role, and a key
// it does not hold has none); and an error never holds a key, nor 8 bytes
// of one (the messages name a line by number).
func FuzzLoad(f *testing.F) {
	for _, s := range []struct{ file, env string }{
		{"# clients\n c1 \n\nc2\n", "a1, a2,"},
		{"\ufeff# keys\nsk_live_4eC39HqLyjWDarjtT1zdp7dc\n", ""},
		{"sk_live_4eC39HqLyjWDarjtT1zdp7dc #prod\n", "sk_live_4eC39HqLyjWDarjtT1zdp7dc\nx"},
		{"s\x00k\x00_\x00l\x00i\x00v\x00e\x00_\x004\x00e\x00C\x003\x009\x00H\x00q\x00L\x00\n", ", ,"},
		{"# nothing\n", " "},
		{"k\tey\r\n\tdev-0123456789abcdef0123456789abcdef\x7f\n", "dev-0123456789abcdef0123456789abcdef"},
		{strings.Repeat("x", keys.MaxKeyLen+1) + "\n", strings.Repeat("y", keys.MaxKeyLen)},
		{"c1\n" + strings.Repeat("k3y", keys.MaxKeyLen/3+1) + "\n", ""},
		{"c1\n", "a1," + strings.Repeat("k3y", keys.MaxKeyLen/3+1)},
	} {
		f.Add([]byte(s.file), s.env)
	}
	path := filepath.Join(f.TempDir(), "keys")
	f.Fuzz(func(t *testing.T, file []byte, env string) {
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		// The format, as Source documents it.
		var fileKeys, envKeys []string
		for _, line := range strings.Split(string(bytes.TrimPrefix(file, []byte("\ufeff"))), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				fileKeys = append(fileKeys, line)
			}
		}
		for _, k := range strings.Split(env, ",") {
			if k = strings.TrimSpace(k); k != "" {
				envKeys = append(envKeys, k)
			}
		}
		k, err := keys.Load(keys.Source{File: path, Name: "--api-keys-file"}, keys.Source{Env: env, Name: "RATEDB_ADMIN_KEYS"})
		if err != nil {
			msg := strings.ReplaceAll(err.Error(), path, "")
			for _, key := range append(fileKeys, envKeys...) {
				if w, ok := quotes(msg, key); ok {
					t.Fatalf("the error quotes %q of the key %q: %v", w, key, err)
				}
			}
			return
		}
		if len(fileKeys) == 0 {
			t.Fatal("a keys file holding no key was accepted")
		}
		if env != "" && len(envKeys) == 0 {
			t.Fatal("a value holding no key was accepted")
		}
		admin := map[string]bool{}
		for _, key := range envKeys {
			admin[key] = true
			if got := k.Role(key); got != keys.Admin {
				t.Fatalf("the value's key %q has role %v", key, got)
			}
		}
		for _, key := range fileKeys {
			if got := k.Role(key); !admin[key] && got != keys.Client {
				t.Fatalf("the file's key %q has role %v", key, got)
			}
			if other := key + "\x01"; k.Role(other) != keys.None {
				t.Fatalf("%q, held by neither source, has a role", other)
			}
		}
	})
}

// quotes returns 8 bytes of key that msg holds, if any, among those with
// a letter and a digit and no space or tab (the messages' own words hold
// no digit, or no letter).
func quotes(msg, key string) (string, bool) {
	for i := 0; i+8 <= len(key); i++ {
		w := key[i : i+8]
		if strings.ContainsAny(w, "0123456789") && strings.ContainsAny(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") &&
			!strings.ContainsAny(w, " \t") && strings.Contains(msg, w) {
			return w, true
		}
	}
	return "", false
}
