package envoyconf

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v2"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/yamlerr"
)

// The YAML shapes of envoyproxy/ratelimit's config files.
type yamlReplaces struct {
	Name string `yaml:"name"`
}

type yamlRateLimit struct {
	RequestsPerUnit uint32         `yaml:"requests_per_unit"`
	Unit            string         `yaml:"unit"`
	Unlimited       bool           `yaml:"unlimited"`
	Name            string         `yaml:"name"`
	Replaces        []yamlReplaces `yaml:"replaces"`
}

type yamlDescriptor struct {
	Key            string           `yaml:"key"`
	Value          string           `yaml:"value"`
	RateLimit      *yamlRateLimit   `yaml:"rate_limit"`
	Descriptors    []yamlDescriptor `yaml:"descriptors"`
	ShadowMode     bool             `yaml:"shadow_mode"`
	QuotaMode      bool             `yaml:"quota_mode"`
	DetailedMetric bool             `yaml:"detailed_metric"`
	ValueToMetric  bool             `yaml:"value_to_metric"`
	ShareThreshold bool             `yaml:"share_threshold"`
	// Metadata is sent by envoyproxy/ratelimit (since April 2026) in the
	// response's dynamic metadata when that is enabled there; ratedb sends
	// no dynamic metadata, so it is only checked as upstream checks it.
	Metadata map[string]any `yaml:"metadata"`
}

type yamlRoot struct {
	Domain      string           `yaml:"domain"`
	Descriptors []yamlDescriptor `yaml:"descriptors"`
}

// validKeys are the mapping keys envoyproxy/ratelimit accepts anywhere in a
// file (it checks names, not where they appear; so do we).
var validKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true,
	"rate_limit": true, "unit": true, "requests_per_unit": true,
	"unlimited": true, "shadow_mode": true, "quota_mode": true, "name": true,
	"replaces": true, "detailed_metric": true, "value_to_metric": true,
	"share_threshold": true, "metadata": true,
}

// suggestKey returns, for the unknown key s, the known key it misspells
// with underscores left out or in another case ("did you mean
// rate_limit?"), or the list of the known keys: never s itself, which
// could be part of a secret of a keys file given by mistake.
func suggestKey(s string) string {
	norm := func(k string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(k)) }
	for k := range validKeys {
		if norm(k) == norm(s) {
			return "did you mean " + k + "?"
		}
	}
	known := make([]string, 0, len(validKeys))
	for k := range validKeys {
		known = append(known, k)
	}
	sort.Strings(known)
	return "a key is one of " + strings.Join(known, ", ")
}

// describePanic describes a panic recovered while parsing, quoting nothing
// of the file.
func describePanic(r any) string {
	if err, ok := r.(error); ok {
		return yamlerr.Describe(err)
	}
	return "the parser failed"
}

// maxFileSize bounds one config file (real ones are a few KiB).
const maxFileSize = 16 << 20

// parseYAML decodes one file as envoyproxy/ratelimit's
// ConfigFileContentToYaml does, with the same parser: a first pass into a
// generic map checks that every mapping key is a known string, every list a
// list of mappings and every leaf a string, an integer, a boolean or null;
// a second pass fills the root. yaml.v2 keeps the last of repeated keys and
// gives a date as its text, so such files load here as they do there.
func parseYAML(name string, data []byte) (root *yamlRoot, err error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%w: %s: file larger than %d bytes", ErrInvalidConfig, name, maxFileSize)
	}
	defer func() {
		// envoyproxy/ratelimit recovers from any panic while loading and
		// reports it as a config error; so do we.
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("%w: %s: error loading config file: %s", ErrInvalidConfig, name, describePanic(r))
		}
	}()
	generic := map[any]any{}
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return nil, fmt.Errorf("%w: %s: error loading config file: %s", ErrInvalidConfig, name, yamlerr.Describe(err))
	}
	if err := validateMap(generic); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
	}
	root = &yamlRoot{}
	if err := yaml.Unmarshal(data, root); err != nil {
		return nil, fmt.Errorf("%w: %s: error loading config file: %s", ErrInvalidConfig, name, yamlerr.Describe(err))
	}
	return root, nil
}

func validateMap(m map[any]any) error {
	for k, v := range m {
		s, ok := k.(string)
		if !ok {
			// Neither key is quoted: the file may not be a config file
			// at all but a keys file given by mistake.
			return fmt.Errorf("config error, a key is of type %T, not string", k)
		}
		if !validKeys[s] {
			return fmt.Errorf("config error, unknown key (%s)", suggestKey(s))
		}
		if s == "metadata" {
			continue // free-form: checked when converted (checkMetadata)
		}
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				m, ok := e.(map[any]any)
				if !ok {
					return fmt.Errorf("config error, yaml file contains list of type other than map under %q", s)
				}
				if err := validateMap(m); err != nil {
					return err
				}
			}
		case map[any]any:
			if err := validateMap(v); err != nil {
				return err
			}
		case string, int, bool, nil:
		default:
			return fmt.Errorf("config error, value of %q is of type %T", s, v)
		}
	}
	return nil
}

// checkMetadata checks a descriptor's metadata as envoyproxy/ratelimit
// does when it loads it: converted, nested maps' keys to their text, into a
// protobuf Struct, which refuses what JSON cannot hold (a string that is
// not UTF-8, such as a !!binary value's bytes).
func checkMetadata(m map[string]any) error {
	if len(m) == 0 {
		return nil
	}
	conv := make(map[string]any, len(m))
	for k, v := range m {
		conv[k] = plainYAML(v)
	}
	if _, err := structpb.NewStruct(conv); err != nil {
		return fmt.Errorf("error parsing metadata: %v", err)
	}
	return nil
}

// plainYAML turns yaml.v2's map[any]any, at any depth, into map[string]any
// (keys by their fmt text, as upstream's convertMap does).
func plainYAML(v any) any {
	switch v := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprintf("%v", k)] = plainYAML(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plainYAML(e)
		}
		return out
	default:
		return v
	}
}
