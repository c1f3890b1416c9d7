package envoyconf

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limit is the rate limit of one config entry. A Limit is immutable once
// loaded and safe to share between goroutines.
type Limit struct {
	// Name is the rate_limit's name; "" when the file gives none.
	Name string
	// Path names the entry as envoyproxy/ratelimit's stats do:
	// domain.key_value.key..., e.g. "edge.path_/api/*". It holds config text
	// only, never a request's values.
	Path string
	// RequestsPerUnit is the number of hits allowed per window (0 denies all).
	RequestsPerUnit uint32
	// Unit is the window; Unknown when Unlimited.
	Unit Unit
	// Unlimited answers OK without counting.
	Unlimited bool
	// ShadowMode counts and decides, but the answer is always OK.
	ShadowMode bool
	// QuotaMode makes the limit a soft one, as envoyproxy/ratelimit's
	// quota_mode: a descriptor over it answers OVER_LIMIT in its own status
	// and counts nothing, and its request is over the limit only if every
	// quota_mode descriptor of it is over its limit (or an enforced one is).
	QuotaMode bool
	// DetailedMetric is accepted and kept for listing; it changes no decision.
	DetailedMetric bool
	// Replaces names the limits this one replaces: a descriptor whose limit
	// has one of these names is not checked in the same request.
	Replaces []string
}

// node is one level of a domain's descriptor tree.
type node struct {
	children map[string]*node // by composite key "key" or "key_value"
	// wildcards are the children whose composite key holds a "*", in file
	// order; the first that matches wins.
	wildcards []wildcard
	limit     *Limit
	// share is, for a wildcard entry with share_threshold, its value pattern
	// (e.g. "files/*"): every value it matches shares one counter.
	share string
	// entry is the config's key and value ("" when key-only).
	entry Entry
}

// Config is a loaded set of domains. A Config is immutable and safe for
// concurrent use; reloading builds a new one.
type Config struct {
	domains map[string]*node
	order   []string // domains in load order
	files   []string
}

// Entry is one (key, value) pair of a request descriptor.
type Entry struct {
	Key   string
	Value string
}

// Match is the outcome of matching one descriptor.
type Match struct {
	// Limit is the matched limit, nil when none applies.
	Limit *Limit
	// Share is nil unless a share_threshold wildcard matched: then Share[i],
	// when not "", replaces entry i's value in the counted key.
	Share []string
}

// Files returns the names of the files the config was loaded from, in load
// order: a directory's files by their slash-separated path below it.
func (c *Config) Files() []string { return append([]string(nil), c.files...) }

// HasDomain reports whether the config declares domain.
func (c *Config) HasDomain(domain string) bool {
	_, ok := c.domains[domain]
	return ok
}

// Match returns the limit that applies to one descriptor of a request to
// domain, with envoyproxy/ratelimit's precedence (see the package doc).
// Match allocates nothing unless a share_threshold entry matches.
func (c *Config) Match(domain string, entries []Entry) Match {
	var m Match
	n := c.domains[domain]
	if n == nil {
		return m
	}
	for i, e := range entries {
		composite := e.Key + "_" + e.Value
		next := n.children[composite]
		viaWildcard := false
		if next == nil {
			for _, w := range n.wildcards {
				if w.match(composite) {
					next, viaWildcard = n.children[w.composite], true
					break
				}
			}
		}
		if next == nil {
			next = n.children[e.Key]
		}
		if next == nil {
			break
		}
		if viaWildcard && next.share != "" {
			if m.Share == nil {
				m.Share = make([]string, len(entries))
			}
			m.Share[i] = strings.TrimPrefix(next.share, e.Key+"_")
		}
		if next.limit != nil && i == len(entries)-1 {
			m.Limit = next.limit
		}
		if len(next.children) == 0 {
			break
		}
		n = next
	}
	if m.Limit == nil {
		m.Share = nil
	}
	return m
}

// File is one config file's name (used in errors) and contents.
type File struct {
	Name string
	Data []byte
}

// Parse builds a Config from files in order. Like envoyproxy/ratelimit
// with its default settings, a domain declared in two files is an error.
// Every error wraps ErrInvalidConfig and names the file.
func Parse(files []File) (*Config, error) { return ParseWith(files, LoadOptions{}) }

// ParseWith is Parse with options: with o.MergeDomains, the descriptors of
// a domain declared in several files are merged (see LoadOptions).
func ParseWith(files []File, o LoadOptions) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	for _, f := range files {
		root, err := parseYAML(f.Name, f.Data)
		if err != nil {
			return nil, err
		}
		if root.Domain == "" {
			return nil, fmt.Errorf("%w: %s: config file cannot have empty domain", ErrInvalidConfig, f.Name)
		}
		d, dup := c.domains[root.Domain]
		if dup && !o.MergeDomains {
			return nil, fmt.Errorf("%w: %s: duplicate domain %q in config file", ErrInvalidConfig, f.Name, root.Domain)
		}
		if !dup {
			d = &node{children: map[string]*node{}}
		}
		// A merged file's descriptors join the domain's top level, after
		// those of earlier files (wildcards included, in that order), and
		// one that repeats a top-level entry of an earlier file is a
		// duplicate, as it is within a file.
		if err := d.load(root.Domain+".", root.Descriptors); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, f.Name, err)
		}
		if !dup {
			c.domains[root.Domain] = d
			c.order = append(c.order, root.Domain)
		}
		c.files = append(c.files, f.Name)
	}
	return c, nil
}

// load adds descriptors below n, checking them as envoyproxy/ratelimit does.
func (n *node) load(parent string, descs []yamlDescriptor) error {
	for _, d := range descs {
		if d.Key == "" {
			return fmt.Errorf("descriptor has empty key")
		}
		composite := d.Key
		if d.Value != "" {
			composite += "_" + d.Value
		}
		path := parent + composite
		if _, dup := n.children[composite]; dup {
			return fmt.Errorf("duplicate descriptor composite key %q", path)
		}
		child := &node{children: map[string]*node{}, entry: Entry{Key: d.Key, Value: d.Value}}
		if d.RateLimit != nil {
			l, err := newLimit(path, d)
			if err != nil {
				return err
			}
			child.limit = l
		}
		isWildcard := strings.Contains(composite, "*")
		if d.ShareThreshold {
			if !isWildcard {
				return fmt.Errorf("share_threshold can only be used with wildcard values (containing '*'), but found key '%s'", composite)
			}
			child.share = composite
		}
		if isWildcard {
			n.wildcards = append(n.wildcards, wildcard{composite: composite, parts: strings.Split(composite, "*")})
		}
		if err := checkMetadata(d.Metadata); err != nil {
			return err
		}
		if err := child.load(path+".", d.Descriptors); err != nil {
			return err
		}
		n.children[composite] = child
	}
	return nil
}

// wildcard is a config entry whose composite key holds a "*", split at
// each "*" when loaded.
type wildcard struct {
	composite string
	parts     []string // at least two
}

// match reports whether composite, a request entry's "key_value", matches
// the pattern: each "*" stands for any run of characters, none included,
// so the pattern's first part must begin composite, its last part end it,
// and the parts between appear in order in what lies between, without
// overlapping. This is envoyproxy/ratelimit's wildcardMatch: a greedy
// leftmost search is exact here, because taking each middle part at its
// earliest occurrence leaves the most room for the parts after it.
func (w wildcard) match(composite string) bool {
	first, last := w.parts[0], w.parts[len(w.parts)-1]
	if len(composite) < len(first)+len(last) || !strings.HasPrefix(composite, first) || !strings.HasSuffix(composite, last) {
		return false
	}
	rest := composite[len(first) : len(composite)-len(last)]
	for _, p := range w.parts[1 : len(w.parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

func newLimit(path string, d yamlDescriptor) (*Limit, error) {
	rl := d.RateLimit
	unit, valid := parseUnit(rl.Unit)
	if rl.Unlimited {
		if valid {
			return nil, fmt.Errorf("should not specify rate limit unit when unlimited")
		}
		unit = Unknown
	} else if !valid {
		return nil, fmt.Errorf("invalid rate limit unit %q", rl.Unit)
	}
	if !rl.Unlimited && !utf8.ValidString(rl.Name) {
		// The name goes into current_limit, a proto3 string, in every
		// answer the entry gives: protobuf-go refuses to marshal one that
		// is not UTF-8, so each call matching it would fail (INTERNAL),
		// and Envoy lets such a call through by default. envoyproxy/
		// ratelimit loads the name and fails those calls the same way;
		// an unlimited entry's answers carry no current_limit.
		return nil, fmt.Errorf("rate_limit name of descriptor %q is not valid UTF-8 (it is sent in current_limit, a protobuf string)", path)
	}
	l := &Limit{
		Name: rl.Name, Path: path, RequestsPerUnit: rl.RequestsPerUnit, Unit: unit,
		Unlimited: rl.Unlimited, ShadowMode: d.ShadowMode, QuotaMode: d.QuotaMode,
		DetailedMetric: d.DetailedMetric,
	}
	for _, r := range rl.Replaces {
		if r.Name == "" {
			return nil, fmt.Errorf("should not have an empty replaces entry")
		}
		if r.Name == rl.Name {
			return nil, fmt.Errorf("replaces should not contain name of same descriptor")
		}
		l.Replaces = append(l.Replaces, r.Name)
	}
	return l, nil
}
