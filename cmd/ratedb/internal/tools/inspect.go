// Package tools holds the state-file tools: inspect (list the windows of a
// ratedb file, read-only) and compact (rewrite it to reclaim space).
package tools

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ratedb/ratedb/internal/layout"
	"github.com/ratedb/ratedb/internal/record"
)

// ErrInUse is returned when the file's lock is held by a running ratedb. It
// does not suggest copying the file: a copy taken while the service writes
// snapshots is not consistent.
var ErrInUse = errors.New("the file is in use by a running ratedb (its lock is held): stop it first (a copy taken while it runs is not consistent)")

// lockTimeout is how long the tools wait for the file's lock.
const lockTimeout = time.Second

// Window is one window of a state file.
type Window struct {
	// Key is the key the limiter counted (for the service: see the
	// README's "counted keys"). In JSON, a key that is not valid UTF-8 (an
	// Envoy key with a length of 128 or more in it, or one hashed for its
	// length) has each invalid byte shown as U+FFFD: KeyBytes then holds it.
	Key string `json:"key"`
	// KeyBytes is the key's bytes (base64 in JSON), set only when the key
	// is not valid UTF-8.
	KeyBytes  []byte   `json:"key_bytes,omitempty"`
	Algorithm string   `json:"algorithm"`
	Layered   bool     `json:"layered,omitempty"`
	Scales    []string `json:"scales"`
	Counts    []int64  `json:"counts"`
	// Ends are the ends of each tier's window (RFC 3339, UTC); "" for a
	// tier without one.
	Ends []string `json:"ends"`
	// Live reports whether any tier's window is still running.
	Live bool `json:"live"`
}

// Summary totals a file. Records counts windows, plus one for each damaged
// block (Unreadable counts those and windows of an unknown kind).
type Summary struct {
	Records    int `json:"records"`
	Listed     int `json:"listed"`
	Live       int `json:"live"`
	Expired    int `json:"expired"`
	Unreadable int `json:"unreadable"`
	// Format is the file's format: "ratedb/2", or "ratedb/1" for a file
	// that ratedb (serve, compact) migrates to ratedb/2 when it opens it.
	Format string `json:"format"`
}

// legacyNote follows the format of a ratedb/1 file in the text summary.
const legacyNote = " (ratedb migrates it to ratedb/2 when it opens it: serve or compact)"

// Inspect lists the windows of the ratedb file at path whose key starts
// with prefix, opening it read-only (a file of format ratedb/1, which ratedb
// migrates when it opens it, is read as it is). It returns ErrInUse while a
// ratedb process holds the file.
func Inspect(path, prefix string, now time.Time) ([]Window, Summary, error) {
	var out []Window
	var sum Summary
	err := layout.Read(path, lockTimeout, layout.Visitor{
		Format: func(marker string) { sum.Format = marker },
		Window: func(k []byte, cs []record.Counter) error {
			sum.Records++
			w, key, ok := parseKey(k)
			if !ok || len(cs) != len(w.Scales) {
				sum.Unreadable++
				return nil
			}
			if !strings.HasPrefix(key, prefix) {
				return nil
			}
			w.Key = key
			if !utf8.ValidString(key) {
				w.KeyBytes = []byte(key)
			}
			for _, c := range cs {
				w.Counts = append(w.Counts, c.Count)
				end := ""
				if c.End != 0 {
					end = time.UnixMilli(c.End).UTC().Format(time.RFC3339Nano)
				}
				w.Ends = append(w.Ends, end)
				if c.End > now.UnixMilli() {
					w.Live = true
				}
			}
			sum.Listed++
			if w.Live {
				sum.Live++
			} else {
				sum.Expired++
			}
			out = append(out, w)
			return nil
		},
		Damaged: func(error) error {
			sum.Records++
			sum.Unreadable++
			return nil
		},
	})
	switch {
	case errors.Is(err, layout.ErrInUse):
		return nil, Summary{}, fmt.Errorf("%s: %w", path, ErrInUse)
	case errors.Is(err, layout.ErrFormat):
		return nil, Summary{}, fmt.Errorf("%s is not a readable ratedb file: %w", path, err)
	case err != nil:
		return nil, Summary{}, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, sum, nil
}

var algNames = map[byte]string{1: "fixed", 2: "per_key", 3: "staggered"}

// parseKey splits a record key into its spec (algorithm, scales) and the
// counted key, as ratedb's spec.go writes it: the algorithm byte (top bit
// set for a layered limiter, then the number of tiers), each scale in
// milliseconds (8 bytes, big endian), then the key.
func parseKey(k []byte) (Window, string, bool) {
	var w Window
	if len(k) < 1 {
		return w, "", false
	}
	alg, n, p := k[0], 1, 1
	if alg&0x80 != 0 {
		if len(k) < 2 {
			return w, "", false
		}
		alg &^= 0x80
		w.Layered = true
		n, p = int(k[1]), 2
	}
	name, ok := algNames[alg]
	if !ok || n < 1 || n > record.MaxTiers || len(k) < p+8*n+1 {
		return w, "", false
	}
	w.Algorithm = name
	for i := range n {
		ms := int64(binary.BigEndian.Uint64(k[p+8*i:]))
		w.Scales = append(w.Scales, (time.Duration(ms) * time.Millisecond).String())
	}
	return w, string(k[p+8*n:]), true
}

// WriteText writes the windows and the summary as aligned text.
func WriteText(w io.Writer, ws []Window, s Summary) error {
	var b bytes.Buffer
	for _, x := range ws {
		state := "expired"
		if x.Live {
			state = "live"
		}
		alg := x.Algorithm
		if x.Layered {
			alg += " (layered)"
		}
		fmt.Fprintf(&b, "%s\t%s\tscale=%s\tcount=%s\tend=%s\t%s\n", printable(x.Key), alg,
			strings.Join(x.Scales, ","), joinInts(x.Counts), strings.Join(x.Ends, ","), state)
	}
	note := ""
	if s.Format == string(layout.LegacyFormat) {
		note = legacyNote
	}
	fmt.Fprintf(&b, "summary: %d records, %d listed (%d live, %d expired), %d unreadable; format %s%s\n",
		s.Records, s.Listed, s.Live, s.Expired, s.Unreadable, s.Format, note)
	_, err := w.Write(b.Bytes())
	return err
}

// WriteJSON writes {"summary":{...},"windows":[...]}, indented (encoding/json
// writes a map's members in the order of their names).
func WriteJSON(w io.Writer, ws []Window, s Summary) error {
	if ws == nil {
		ws = []Window{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"windows": ws, "summary": s})
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}

// printable returns a key as it is, or quoted in Go syntax
// (strconv.Quote) if printing it as it is could mislead: invalid UTF-8, or
// any character strconv.IsPrint refuses (a tab, the column separator; C0
// and C1 controls, which a terminal acts on: "\x1b[" and "\u009b" start
// escape sequences; format characters such as U+202E, which reorders the
// text after it), or a key that is empty or starts with '"' (it would read
// as a quoted one). Keys come from clients, or from a crafted file.
func printable(s string) string {
	if s == "" || s[0] == '"' || !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}
