//go:build race

package ratedb

// underRace: the race detector drops a quarter of what is put in a
// sync.Pool, where ristretto batches the uses its frequency sketch hears
// of, so the sketch hears of almost none of them.
const underRace = true
