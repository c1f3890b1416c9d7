module github.com/ratedb/ratedb

go 1.26.8

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/dgraph-io/ristretto/v2 v2.4.2
	github.com/stretchr/testify v1.11.1
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
