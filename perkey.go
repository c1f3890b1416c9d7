package ratedb

// perKeyEnd returns the end of the window a PerKeyWindow key opens when it is
// hit at now with no window open: the window starts at now and runs for one
// scale, like Redis INCR followed by EXPIRE NX. While the window is open
// (now < end) every hit joins it; the first hit at or after end opens the
// next one. It is pure; see FuzzWindowArithmetic.
func perKeyEnd(now, scale int64) int64 {
	return now + scale
}
