//go:build !race

package ratedb

// underRace: see race_internal_test.go.
const underRace = false
