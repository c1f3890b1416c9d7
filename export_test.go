package ratedb

// SetMaxBlockBytes sets the size past which a block is split (and against
// which the janitor merges small blocks), and returns a function that
// restores the default. Small blocks make a few windows exercise splits and
// merges.
func SetMaxBlockBytes(n int) (restore func()) {
	blockCapOverride.Store(int64(n))
	return func() { blockCapOverride.Store(0) }
}

// DiscardSnapshotWrites makes every snapshot write nothing and report its
// windows written (the windows are lost), and returns a function that
// restores writing: BenchmarkFlood's bound on what any file layout could
// give.
func DiscardSnapshotWrites() (restore func()) {
	testDiscardBatches.Store(true)
	return func() { testDiscardBatches.Store(false) }
}
