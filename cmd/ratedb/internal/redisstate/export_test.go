package redisstate

// WithMaxSize returns r with its bound on the rules' value set to n bytes,
// so that tests reach it without writing 256 MiB.
func WithMaxSize(r RulesStorage, n int) RulesStorage {
	r.maxSize = n
	return r
}
