// Package tools holds the state-file tools: inspect (list the windows of a
// ratedb file, read-only) and compact (rewrite it to reclaim space).
package tools

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
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
// with prefix, sorted by key, with the file's summary (see List). It holds
// every window in memory: the command streams them with List instead.
func Inspect(path, prefix string, now time.Time) ([]Window, Summary, error) {
	l, err := List(path, prefix, now)
	if err != nil {
		return nil, Summary{}, err
	}
	defer l.Close()
	var out []Window
	err = l.Each(func(w Window) error {
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, Summary{}, err
	}
	return out, l.Summary, nil
}

// Listing is the windows of a file that List read, sorted by key (windows
// of one key, under several limiters, in the order of the file), and the
// file's summary. It holds at most sortBudget bytes of windows in memory:
// the others wait, sorted, in temporary files. Each reads the windows
// once; Close removes the temporary files. A Listing is not safe for
// concurrent use.
type Listing struct {
	// Summary totals the file (complete once List returns).
	Summary Summary
	now     time.Time
	mem     []entry    // the windows read last, sorted
	runs    []*os.File // earlier windows, sorted in runs of at most sortBudget bytes
	read    bool
}

// entry is a window as the file holds it: its record key (spec and key)
// and counters; key is the counted key, a part of rec.
type entry struct {
	rec, key []byte
	cs       []record.Counter
}

// size is what e holds in memory, as sortBudget counts it.
func (e *entry) size() int { return len(e.rec) + 16*len(e.cs) + 80 }

// sortBudget is how many bytes of windows (entry.size) List sorts in
// memory before it writes them, sorted, to a temporary file: what bounds
// its memory with millions of windows. A variable for the tests.
var sortBudget = 16 << 20

// List reads the windows of the ratedb file at path whose key starts with
// prefix, opening it read-only (a file of format ratedb/1, which ratedb
// migrates when it opens it, is read as it is), and totals the file's
// windows as of now in Listing.Summary. It returns ErrInUse while a ratedb
// process holds the file. With more windows than sortBudget bytes, it
// sorts them in temporary files (os.CreateTemp, in TMPDIR), which Close
// removes.
func List(path, prefix string, now time.Time) (_ *Listing, err error) {
	l := &Listing{now: now}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	var sum Summary
	size, pre := 0, []byte(prefix)
	err = layout.Read(path, lockTimeout, layout.Visitor{
		Format: func(marker string) { sum.Format = marker },
		Window: func(k []byte, cs []record.Counter) error {
			sum.Records++
			n, at, ok := spec(k)
			if !ok || len(cs) != n {
				sum.Unreadable++
				return nil
			}
			if !bytes.HasPrefix(k[at:], pre) {
				return nil
			}
			sum.Listed++
			if live(cs, now) {
				sum.Live++
			} else {
				sum.Expired++
			}
			// k and cs are valid only during the call.
			rec := bytes.Clone(k)
			e := entry{rec: rec, key: rec[at:], cs: slices.Clone(cs)}
			l.mem = append(l.mem, e)
			if size += e.size(); size >= sortBudget {
				size = 0
				return l.spill()
			}
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
		return nil, fmt.Errorf("%s: %w", path, ErrInUse)
	case errors.Is(err, layout.ErrFormat):
		return nil, fmt.Errorf("%s is not a readable ratedb file: %w", path, err)
	case err != nil:
		return nil, err
	}
	sortEntries(l.mem)
	l.Summary = sum
	return l, nil
}

// sortEntries sorts es by key, keeping the order of entries of one key.
func sortEntries(es []entry) {
	slices.SortStableFunc(es, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
}

// spill sorts l.mem and writes it to a new temporary file, a run: for each
// window, its record key's length (uvarint), the record key, the offset of
// the counted key in it (uvarint), the number of counters (uvarint), then
// each counter's count and end (varints).
func (l *Listing) spill() (err error) {
	sortEntries(l.mem)
	f, err := os.CreateTemp("", "ratedb-inspect-*")
	if err != nil {
		return fmt.Errorf("sorting the windows in a temporary file: %w", err)
	}
	l.runs = append(l.runs, f)
	// Gone from the directory at once where the system allows it (the
	// open file stays readable), so that nothing is left behind if
	// inspect is killed; Close removes it otherwise.
	_ = os.Remove(f.Name())
	w := bufio.NewWriterSize(f, 64<<10)
	var b []byte
	for i := range l.mem {
		e := &l.mem[i]
		b = binary.AppendUvarint(b[:0], uint64(len(e.rec)))
		b = append(b, e.rec...)
		b = binary.AppendUvarint(b, uint64(len(e.rec)-len(e.key)))
		b = binary.AppendUvarint(b, uint64(len(e.cs)))
		for _, c := range e.cs {
			b = binary.AppendVarint(b, c.Count)
			b = binary.AppendVarint(b, c.End)
		}
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("sorting the windows in a temporary file: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("sorting the windows in a temporary file: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("sorting the windows in a temporary file: %w", err)
	}
	clear(l.mem)
	l.mem = l.mem[:0]
	return nil
}

// Close removes the Listing's temporary files. It may be called more than
// once.
func (l *Listing) Close() error {
	var errs []error
	for _, f := range l.runs {
		errs = append(errs, f.Close())
		if err := os.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	l.runs, l.mem = nil, nil
	return errors.Join(errs...)
}

// source is one sorted run of windows: a temporary file, or the windows
// in memory (r nil).
type source struct {
	i   int // the run's place in the file's order, which breaks ties
	r   *bufio.Reader
	mem []entry
	cur entry
	buf []byte
	cs  []record.Counter
}

// next reads the source's next window into s.cur (valid until the next
// call), or returns io.EOF.
func (s *source) next() error {
	if s.r == nil {
		if len(s.mem) == 0 {
			return io.EOF
		}
		s.cur, s.mem = s.mem[0], s.mem[1:]
		return nil
	}
	n, err := binary.ReadUvarint(s.r)
	if err != nil {
		return err // io.EOF at the end of the run
	}
	s.buf = slices.Grow(s.buf[:0], int(n))[:n]
	at, ncs := uint64(0), uint64(0)
	if _, err = io.ReadFull(s.r, s.buf); err == nil {
		if at, err = binary.ReadUvarint(s.r); err == nil {
			ncs, err = binary.ReadUvarint(s.r)
		}
	}
	if err == nil && (at > n || ncs > record.MaxTiers) {
		err = errors.New("bad record")
	}
	s.cs = s.cs[:0]
	for i := uint64(0); err == nil && i < ncs; i++ {
		var c record.Counter
		if c.Count, err = binary.ReadVarint(s.r); err == nil {
			c.End, err = binary.ReadVarint(s.r)
		}
		s.cs = append(s.cs, c)
	}
	if err != nil {
		// inspect wrote the file: it was changed, or cut short, since.
		return fmt.Errorf("reading back the windows sorted in a temporary file: %w", noEOF(err))
	}
	s.cur = entry{rec: s.buf, key: s.buf[at:], cs: s.cs}
	return nil
}

// noEOF turns io.EOF, the end of a run in the middle of a window, into
// io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// sources is a heap of sources by their current window's key, then by
// their place in the file.
type sources []*source

func (h sources) Len() int { return len(h) }
func (h sources) Less(i, j int) bool {
	if c := bytes.Compare(h[i].cur.key, h[j].cur.key); c != 0 {
		return c < 0
	}
	return h[i].i < h[j].i
}
func (h sources) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sources) Push(x any)   { *h = append(*h, x.(*source)) }
func (h *sources) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Each calls fn with each window of the Listing, sorted by key, until fn
// returns an error, which Each returns. It can be called once.
func (l *Listing) Each(fn func(Window) error) error {
	if l.read {
		return errors.New("tools: the windows of a Listing are read once")
	}
	l.read = true
	h := make(sources, 0, len(l.runs)+1)
	for i, f := range l.runs {
		h = append(h, &source{i: i, r: bufio.NewReaderSize(f, 32<<10)})
	}
	h = append(h, &source{i: len(l.runs), mem: l.mem})
	live := h[:0]
	for _, s := range h {
		switch err := s.next(); {
		case err == nil:
			live = append(live, s)
		case err != io.EOF:
			return err
		}
	}
	h = live
	heap.Init(&h)
	for len(h) > 0 {
		s := h[0]
		if err := fn(window(s.cur, l.now)); err != nil {
			return err
		}
		switch err := s.next(); {
		case err == nil:
			heap.Fix(&h, 0)
		case err == io.EOF:
			heap.Pop(&h)
		default:
			return err
		}
	}
	return nil
}

// live reports whether any of the counters' windows is still running at
// now: until its end, not at it.
func live(cs []record.Counter, now time.Time) bool {
	for _, c := range cs {
		if c.End > now.UnixMilli() {
			return true
		}
	}
	return false
}

// window is the Window of e as of now.
func window(e entry, now time.Time) Window {
	w, key, _ := parseKey(e.rec)
	w.Key = key
	if !utf8.ValidString(key) {
		w.KeyBytes = []byte(key)
	}
	for _, c := range e.cs {
		w.Counts = append(w.Counts, c.Count)
		end := ""
		if c.End != 0 {
			end = time.UnixMilli(c.End).UTC().Format(time.RFC3339Nano)
		}
		w.Ends = append(w.Ends, end)
	}
	w.Live = live(e.cs, now)
	return w
}

var algNames = map[byte]string{1: "fixed", 2: "per_key", 3: "staggered"}

// spec checks the spec at the start of the record key k, as ratedb's
// spec.go writes it: the algorithm byte (top bit set for a layered limiter,
// then the number of tiers), each scale in milliseconds (8 bytes, big
// endian), then the key, at least one byte. It returns the number of
// tiers n and the offset of the key.
func spec(k []byte) (n, at int, ok bool) {
	if len(k) < 1 {
		return 0, 0, false
	}
	alg, n, p := k[0], 1, 1
	if alg&0x80 != 0 {
		if len(k) < 2 {
			return 0, 0, false
		}
		alg &^= 0x80
		n, p = int(k[1]), 2
	}
	if _, ok := algNames[alg]; !ok || n < 1 || n > record.MaxTiers || len(k) < p+8*n+1 {
		return 0, 0, false
	}
	return n, p + 8*n, true
}

// parseKey splits a record key into its spec (algorithm, scales) and the
// counted key (see spec).
func parseKey(k []byte) (Window, string, bool) {
	var w Window
	n, at, ok := spec(k)
	if !ok {
		return w, "", false
	}
	w.Layered = k[0]&0x80 != 0
	w.Algorithm = algNames[k[0]&^0x80]
	p := at - 8*n
	for i := range n {
		ms := int64(binary.BigEndian.Uint64(k[p+8*i:]))
		w.Scales = append(w.Scales, (time.Duration(ms) * time.Millisecond).String())
	}
	return w, string(k[at:]), true
}

// WriteText writes the windows of l, one line each, then its summary, as
// text. It reads l's windows (Each).
func WriteText(w io.Writer, l *Listing) error {
	b := bufio.NewWriterSize(w, 64<<10)
	err := l.Each(func(x Window) error {
		state := "expired"
		if x.Live {
			state = "live"
		}
		alg := x.Algorithm
		if x.Layered {
			alg += " (layered)"
		}
		_, err := fmt.Fprintf(b, "%s\t%s\tscale=%s\tcount=%s\tend=%s\t%s\n", printable(x.Key), alg,
			strings.Join(x.Scales, ","), joinInts(x.Counts), strings.Join(x.Ends, ","), state)
		return err
	})
	if err != nil {
		return err
	}
	s := l.Summary
	note := ""
	if s.Format == string(layout.LegacyFormat) {
		note = legacyNote
	}
	fmt.Fprintf(b, "summary: %d records, %d listed (%d live, %d expired), %d unreadable; format %s%s\n",
		s.Records, s.Listed, s.Live, s.Expired, s.Unreadable, s.Format, note)
	return b.Flush()
}

// WriteJSON writes {"summary":{...},"windows":[...]}, indented, as
// encoding/json's Encoder, indenting by two spaces, writes a map of the two
// (the members in the order of their names). It reads l's windows (Each).
func WriteJSON(w io.Writer, l *Listing) error {
	b := bufio.NewWriterSize(w, 64<<10)
	sum, err := json.MarshalIndent(l.Summary, "  ", "  ")
	if err != nil {
		return err
	}
	b.WriteString("{\n  \"summary\": ")
	b.Write(sum)
	b.WriteString(",\n  \"windows\": [")
	sep := "\n    "
	err = l.Each(func(x Window) error {
		js, err := json.MarshalIndent(x, "    ", "  ")
		if err != nil {
			return err
		}
		b.WriteString(sep)
		_, err = b.Write(js)
		sep = ",\n    "
		return err
	})
	if err != nil {
		return err
	}
	if sep != "\n    " {
		b.WriteString("\n  ")
	}
	b.WriteString("]\n}\n")
	return b.Flush()
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
