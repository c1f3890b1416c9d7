package envoyconf

import (
	"fmt"

	"gopkg.in/yaml.v3"
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
	"share_threshold": true,
}

// maxFileSize bounds one config file (real ones are a few KiB).
const maxFileSize = 16 << 20

// parseYAML decodes one file into its root after the same key validation as
// envoyproxy/ratelimit: every mapping key a known string, every list a list
// of mappings, every leaf a string, an integer, a boolean or null.
func parseYAML(name string, data []byte) (*yamlRoot, error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%w: %s: file larger than %d bytes", ErrInvalidConfig, name, maxFileSize)
	}
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return nil, fmt.Errorf("%w: %s: error loading config file: %v", ErrInvalidConfig, name, err)
	}
	switch m := generic.(type) {
	case nil:
		// An empty file: it has no domain, reported below.
	case map[string]any:
		if err := validateMap(m); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
		}
	case map[any]any:
		if err := validateAnyMap(m); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
		}
	default:
		return nil, fmt.Errorf("%w: %s: error loading config file: the document is not a mapping", ErrInvalidConfig, name)
	}
	var root yamlRoot
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%w: %s: error loading config file: %v", ErrInvalidConfig, name, err)
	}
	return &root, nil
}

func validateAnyMap(m map[any]any) error {
	for k, v := range m {
		s, ok := k.(string)
		if !ok {
			return fmt.Errorf("config error, key is not of type string: %v", k)
		}
		if err := validateEntry(s, v); err != nil {
			return err
		}
	}
	return nil
}

func validateMap(m map[string]any) error {
	for k, v := range m {
		if err := validateEntry(k, v); err != nil {
			return err
		}
	}
	return nil
}

func validateEntry(k string, v any) error {
	if !validKeys[k] {
		return fmt.Errorf("config error, unknown key %q", k)
	}
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			var err error
			switch m := e.(type) {
			case map[string]any:
				err = validateMap(m)
			case map[any]any:
				err = validateAnyMap(m)
			default:
				return fmt.Errorf("config error, yaml file contains list of type other than map under %q", k)
			}
			if err != nil {
				return err
			}
		}
	case map[string]any:
		return validateMap(v)
	case map[any]any:
		return validateAnyMap(v)
	case string, int, bool, nil:
	default:
		return fmt.Errorf("config error, value of %q is of type %T", k, v)
	}
	return nil
}
