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
//	    value: /api/*                # wildcard: any run of characters
//	    rate_limit: {unit: second, requests_per_unit: 10}
//
// # Matching
//
// A request descriptor is a list of entries (key, value). Matching walks the
// tree one level per entry and never backtracks. At each level the entry
// matches, in this order:
//
//  1. the config entry with exactly that key and value;
//  2. else the first config entry, in file order, with a "*" in its value
//     that matches the value, each "*" standing for any run of characters,
//     none included ("/api/*" matches "/api/" and "/api/v1/users";
//     "/api/*/action" matches "/api/7/action"; "svc*ep*rpc" matches
//     "svc1ep2rpc"), as envoyproxy/ratelimit matches since March 2026
//     (before, "*" was a wildcard only at the end);
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
// # Config directory
//
// Given a directory, Load reads the files envoyproxy/ratelimit reads from
// $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/config through lyft/goruntime's loader
// (with its default RUNTIME_IGNOREDOTFILES=false): every file below the
// directory, in subdirectories too, whatever its name or extension, hidden
// files and hidden directories included. A symlink to a file is read; a
// symlink to a directory is not followed. Files are parsed with the same YAML
// parser, gopkg.in/yaml.v2, so a repeated key keeps its last value and an
// unquoted date is its text. They load in lexical walk order, each named by
// its slash-separated path below the directory (envoyproxy/ratelimit joins
// the path with "." and loads in map order, which changes the file a
// duplicate domain is reported against, and more, see the caveats).
//
// LoadOptions give upstream's two settings that change this:
// IgnoreDotFiles (RUNTIME_IGNOREDOTFILES=true) skips hidden files and
// directories, which a Kubernetes ConfigMap volume needs (its files appear
// both as symlinks and inside a hidden "..<timestamp>" directory, so they
// otherwise load twice and fail with a duplicate domain, there as here);
// MergeDomains (MERGE_DOMAIN_CONFIG=true) merges a domain declared in
// several files instead of refusing it.
//
// # Caveats
//
// Where envoyproxy/ratelimit (its main branch of July 2026, f2fb157)
// behaves otherwise:
//
//   - A file that cannot be read (a dangling symlink, no permission, a fifo
//     or another non-regular file) fails the load. goruntime logs it and
//     goes on without it, which leaves its domain unlimited (a fifo blocks
//     it).
//   - A directory without any file is ErrNoFiles; envoyproxy/ratelimit
//     starts with no domain and reports itself unhealthy.
//   - With RUNTIME_WATCH_ROOT=true (the default) envoyproxy/ratelimit walks
//     $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY and also loads the files beside
//     config/ whose path there starts with "config." (config.yaml,
//     config.d/...); Load reads only below the path it is given.
//   - Two files whose paths below the directory differ only by "/" for "."
//     ("a/b.yaml" and "a.b.yaml") both load. goruntime names each file by
//     its path with "/" replaced by ".", so the one it walks last
//     ("a.b.yaml") replaces the other, whose domain then has no limit.
//   - The path given to Load may itself be a symlink to a directory
//     (goruntime does not descend into one).
//   - A file is at most 16 MiB.
//   - A rate_limit name that is not UTF-8 (a YAML !!binary value) fails
//     the load, unless the limit is unlimited. envoyproxy/ratelimit loads
//     it, then fails every call that matches the entry (gRPC INTERNAL: the
//     name is sent in current_limit, a protobuf string, which protobuf-go
//     will not marshal unless it is UTF-8), and Envoy's default
//     failure_mode_deny: false lets those calls through uncounted.
//
// # Units
//
// second, minute, hour, day and week are fixed windows aligned to the Unix
// epoch (so a week starts on Thursday 00:00 UTC); month is 30 days and year
// is 365 days from the epoch, as in envoyproxy/ratelimit.
package envoyconf
