// Package keys holds the service's API keys as SHA-256 digests and tells a
// presented key's role, comparing in constant time. Keys come only from
// files or the environment, never from URLs, and are never logged.
package keys

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/fileread"
)

// Role is what a key may do.
type Role int

const (
	// None: the key is missing or unknown (401).
	None Role = iota
	// Client keys may call the check API.
	Client
	// Admin keys may manage rules and also call the check API.
	Admin
)

// ErrNoKeys is returned by Load when a keys file, or a non-empty
// environment value, holds no key (a value of only commas and spaces would
// otherwise configure no key without a word).
var ErrNoKeys = errors.New("keys: no key")

// MaxKeyLen is the longest key accepted, in bytes; longer keys are unknown.
const MaxKeyLen = 256

// Keys is a set of client and admin key digests. It is immutable and safe
// for concurrent use.
type Keys struct {
	client, admin [][sha256.Size]byte
}

// Source says where keys come from: a file (one key per line; blank lines
// and lines starting with '#' are ignored; surrounding spaces trimmed; a
// key holding a control character other than a tab, which no HTTP header
// can carry, or a '#' after a space or a tab (a comment after the key,
// which would be part of it: comments go on lines of their own) makes Load
// return an error naming its line, never the key; a
// regular file or a symbolic link to one, of at most fileread.MaxSize
// bytes, or Load returns an error wrapping fileread.ErrNotRegular or
// fileread.ErrTooLarge) or, when File is "", a comma-separated environment
// value (empty: no key, as when the variable is unset; a key holding a
// control character other than a tab is refused there too).
type Source struct {
	File string
	Env  string
	// Name, when not empty, prefixes Load's errors about this source (the
	// flag or environment variable it was given by): the messages name
	// neither a key nor the other source.
	Name string
}

// Load reads the client and admin keys. A file that is given, and an
// environment value that is not empty, must hold at least one key
// (ErrNoKeys otherwise).
func Load(client, admin Source) (*Keys, error) {
	k := &Keys{}
	var err error
	if k.client, err = load(client); err != nil {
		return nil, client.named(err)
	}
	if k.admin, err = load(admin); err != nil {
		return nil, admin.named(err)
	}
	return k, nil
}

// named prefixes err with s.Name, if any.
func (s Source) named(err error) error {
	if s.Name == "" {
		return err
	}
	return fmt.Errorf("%s: %w", s.Name, err)
}

func load(s Source) ([][sha256.Size]byte, error) {
	var raw []string
	if s.File != "" {
		b, err := fileread.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		// A byte order mark (Windows editors write one) is not part of
		// the first line: kept, it would turn a comment into a key.
		b = bytes.TrimPrefix(b, []byte("\ufeff"))
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") {
				if !presentable(line) {
					return nil, fmt.Errorf("keys: line %d of the file %s holds a control character, which no HTTP header can carry (a file saved as UTF-16 holds NULs: save it as UTF-8)", i+1, s.File)
				}
				if inlineComment(line) {
					return nil, fmt.Errorf("keys: line %d of the file %s holds a '#' after a space or a tab: a comment must be on a line of its own, starting with '#' (it would be part of the key)", i+1, s.File)
				}
				raw = append(raw, line)
			}
		}
		if len(raw) == 0 {
			return nil, fmt.Errorf("%w in the file %s", ErrNoKeys, s.File)
		}
	} else {
		for _, k := range strings.Split(s.Env, ",") {
			if k = strings.TrimSpace(k); k != "" {
				if !presentable(k) {
					return nil, errors.New("keys: a key in the value holds a control character, which no HTTP header can carry (separate keys with commas, not line breaks)")
				}
				raw = append(raw, k)
			}
		}
		if s.Env != "" && len(raw) == 0 {
			// Only commas and spaces: never shown, as a value never is.
			return nil, fmt.Errorf("%w in the value, only commas and spaces: unset it to give none", ErrNoKeys)
		}
	}
	out := make([][sha256.Size]byte, 0, len(raw))
	for _, k := range raw {
		if len(k) > MaxKeyLen {
			return nil, fmt.Errorf("keys: a key of %d bytes is longer than %d", len(k), MaxKeyLen)
		}
		out = append(out, sha256.Sum256([]byte(k)))
	}
	return out, nil
}

// presentable reports whether an X-API-Key header can carry k: net/http
// refuses a header value holding a control character other than a tab
// (RFC 9110, section 5.5), so a key holding one (a NUL of a UTF-16 file, a
// line break between keys in a variable) could never match, and a service
// whose keys were all such would answer every request 401 without a word.
func presentable(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// inlineComment reports whether the key line k holds a '#' after a space
// or a tab: written as a comment after the key ("abc #prod"), it would be
// part of the key, which would then never match the key sent.
func inlineComment(k string) bool {
	return strings.Contains(k, " #") || strings.Contains(k, "\t#")
}

// HasClientKeys reports whether any client key is configured.
func (k *Keys) HasClientKeys() bool { return len(k.client) > 0 }

// HasAdminKeys reports whether any admin key is configured.
func (k *Keys) HasAdminKeys() bool { return len(k.admin) > 0 }

// AddClient returns a copy of k that also accepts key as a client key.
func (k *Keys) AddClient(key string) *Keys {
	c := *k
	c.client = append(append([][sha256.Size]byte(nil), k.client...), sha256.Sum256([]byte(key)))
	return &c
}

// Role returns key's role; a key configured both as a client and as an
// admin key is Admin. It compares key's digest with every configured
// digest in constant time, without stopping at a match, so its duration
// says nothing about which key (if any) matched.
func (k *Keys) Role(key string) Role {
	if key == "" || len(key) > MaxKeyLen {
		return None
	}
	d := sha256.Sum256([]byte(key))
	admin, client := 0, 0
	for i := range k.admin {
		admin |= subtle.ConstantTimeCompare(d[:], k.admin[i][:])
	}
	for i := range k.client {
		client |= subtle.ConstantTimeCompare(d[:], k.client[i][:])
	}
	switch {
	case admin == 1:
		return Admin
	case client == 1:
		return Client
	}
	return None
}

// Generate returns a new random development key: "dev-" and 32 random
// bytes in hex.
func Generate() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "dev-" + hex.EncodeToString(b)
}
