package ratedb

// SetMaxBlockBytes sets the size past which a block is split (and against
// which the janitor merges small blocks) for a test that runs alone, and
// returns a function that restores it. Small blocks make a few windows
// exercise splits and merges.
func SetMaxBlockBytes(n int) (restore func()) {
	old := maxBlockBytes
	maxBlockBytes = n
	return func() { maxBlockBytes = old }
}
