package envoyconf_test

import (
	"fmt"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
)

func ExampleConfig_Match() {
	cfg, err := envoyconf.Parse([]envoyconf.File{{Name: "edge.yaml", Data: []byte(`
domain: edge
descriptors:
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: path
    value: /health            # no rate_limit: allow-listed
  - key: path                 # every other path, each counted on its own
    rate_limit: {unit: minute, requests_per_unit: 100}
`)}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, path := range []string{"/api/orders", "/health", "/index.html"} {
		m := cfg.Match("edge", []envoyconf.Entry{{Key: "path", Value: path}})
		if m.Limit == nil {
			fmt.Printf("%s: no limit\n", path)
			continue
		}
		fmt.Printf("%s: %d per %s (%s)\n", path, m.Limit.RequestsPerUnit, m.Limit.Unit, m.Limit.Path)
	}
	// Output:
	// /api/orders: 10 per second (edge.path_/api/*)
	// /health: no limit
	// /index.html: 100 per minute (edge.path)
}
