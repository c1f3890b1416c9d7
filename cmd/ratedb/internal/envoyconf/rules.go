package envoyconf

import "sort"

// Rule is one config entry that carries a rate_limit, for read-only
// listings such as GET /v1/rules.
type Rule struct {
	// Domain is the file's domain.
	Domain string
	// Descriptor is the entry's path below the domain as key or key=value
	// pairs, outermost first.
	Descriptor []Entry
	// Limit is the entry's limit.
	Limit *Limit
}

// Rules lists every entry with a rate_limit, domains in load order and
// entries in sorted composite-key order within each level.
func (c *Config) Rules() []Rule {
	var out []Rule
	for _, d := range c.order {
		out = c.domains[d].collect(d, nil, out)
	}
	return out
}

func (n *node) collect(domain string, path []Entry, out []Rule) []Rule {
	keys := make([]string, 0, len(n.children))
	for k := range n.children {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		child := n.children[k]
		p := append(append([]Entry(nil), path...), child.entry)
		if child.limit != nil {
			out = append(out, Rule{Domain: domain, Descriptor: p, Limit: child.limit})
		}
		out = child.collect(domain, p, out)
	}
	return out
}
