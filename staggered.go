package ratedb

import "github.com/ratedb/ratedb/internal/limits"

// staggeredEnd returns the end of the StaggeredWindow window containing now
// for a key whose boundaries are shifted by offset (0 <= offset < scale):
// windows are [offset + k*scale, offset + (k+1)*scale). It is pure; see
// FuzzWindowArithmetic.
func staggeredEnd(now, scale, offset int64) int64 {
	return fixedEnd(now-offset, scale) + offset
}

// staggerOffset returns key's boundary offset for windows of length scale: a
// stable hash of the key (64-bit FNV-1a, the same in every process, after
// every restart and on every machine; never the cache's per-process seeded
// hash) reduced modulo the scale. Every backend uses the same function
// (internal/limits), so a key resets at the same instant on each.
func staggerOffset(key string, scale int64) int64 { return limits.StaggerOffset(key, scale) }
