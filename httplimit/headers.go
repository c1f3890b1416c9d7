package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ratedb/ratedb"
)

// setHeaders sets the rate-limit headers of res, decided at now, on h.
func setHeaders(h http.Header, res *ratedb.Result, now time.Time, legacy bool) {
	limit := formatInt(res.Limit)
	remaining := formatInt(res.Remaining)
	h.Set("RateLimit-Limit", limit)
	h.Set("RateLimit-Remaining", remaining)
	reset := resetSeconds(res.ResetAt, now)
	if res.Scale > 0 {
		// A window never ends more than one scale after the decision: a
		// clock behind the limiter's must not announce a longer wait.
		reset = min(reset, max(1, ceilSeconds(res.Scale)))
	}
	if !res.Allowed && res.RetryAfter > 0 {
		// The limiter's own measure, so that RateLimit-Reset and
		// Retry-After agree whatever the two clocks read.
		reset = retryAfterSeconds(res.RetryAfter)
	}
	h.Set("RateLimit-Reset", formatInt(reset))
	if p := policy(res); p != "" {
		h.Set("RateLimit-Policy", p)
	}
	if legacy {
		h.Set("X-RateLimit-Limit", limit)
		h.Set("X-RateLimit-Remaining", remaining)
		h.Set("X-RateLimit-Reset", formatInt(unixCeil(res.ResetAt)))
	}
}

// resetSeconds is the RateLimit-Reset value: the whole seconds from now
// until the window ends at resetAt, rounded up, and at least 1, since the
// limiter decided while the window was still open (a clock slightly ahead
// of the limiter's must not announce a reset that has not happened).
func resetSeconds(resetAt, now time.Time) int64 {
	return max(1, ceilSeconds(resetAt.Sub(now)))
}

// retryAfterSeconds is the Retry-After value of a denial: the whole
// seconds until the window ends, rounded up (retrying earlier is denied
// again), and at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	return max(1, ceilSeconds(d))
}

// unixCeil is the Unix time of t in seconds, rounded up.
func unixCeil(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// ceilSeconds is d in seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// policy is the RateLimit-Policy value of res: "limit;w=seconds" for a
// single window, one such item per tier, comma-separated in tier order, for
// a layered limiter. Window lengths are rounded up to whole seconds. It is
// empty when res has no window length (a custom Rater may not set one).
func policy(res *ratedb.Result) string {
	var b []byte
	item := func(limit int64, scale time.Duration) {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, limit, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, ceilSeconds(scale), 10)
	}
	if res.Tiers != nil {
		for _, t := range res.Tiers {
			if t.Scale <= 0 {
				return ""
			}
			item(t.Limit, t.Scale)
		}
		return string(b)
	}
	if res.Scale <= 0 {
		return ""
	}
	item(res.Limit, res.Scale)
	return string(b)
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }
