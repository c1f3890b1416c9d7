// Package envoyconf loads envoyproxy/ratelimit's YAML configuration format
// unchanged and matches Envoy rate limit descriptors against it with
// envoyproxy/ratelimit's exact precedence.
//
// A configuration is one or more files, each declaring one domain and a tree
// of descriptors:
//
//	domain: edge
//	descriptors:
//	  - key: remote_address          # key only: every value counts separately
//	    rate_limit: {unit: minute, requests_per_unit: 60}
//	  - key: path
//	    value: /api/*                # wildcard: only as the last character
//	    rate_limit: {unit: second, requests_per_unit: 10}
//
// # Matching
//
// A request descriptor is a list of entries (key, value). Matching walks the
// tree one level per entry and never backtracks. At each level the entry
// matches, in this order:
//
//  1. the config entry with exactly that key and value;
//  2. else the first config entry, in file order, whose value ends in "*"
//     and whose text before the "*" is a prefix of the value;
//  3. else the config entry with that key and no value.
//
// The limit applies only if the entry matched at the request's last level
// carries a rate_limit: a request deeper or shallower than the rule gets no
// limit, and an exact entry without a rate_limit shadows the key-only one
// (this is how envoyproxy/ratelimit allow-lists a value). An unknown domain
// or an unmatched descriptor has no limit.
//
// Like envoyproxy/ratelimit, an entry is addressed by the composite string
// key + "_" + value, so key "a_b" with value "c" and key "a" with value "b_c"
// are the same entry (and a duplicate if both are declared).
//
// # Units
//
// second, minute, hour, day and week are fixed windows aligned to the Unix
// epoch (so a week starts on Thursday 00:00 UTC); month is 30 days and year
// is 365 days from the epoch, as in envoyproxy/ratelimit.
package envoyconf
