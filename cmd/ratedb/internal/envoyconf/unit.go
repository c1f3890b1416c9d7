package envoyconf

import (
	"strings"
	"time"
)

// Unit is the time unit of a rate limit. Its numeric values are those of
// Envoy's RateLimitResponse.RateLimit.Unit enum, so a Unit converts to that
// enum with a plain conversion.
type Unit int32

// The units of envoyproxy/ratelimit. Unknown is never the unit of a loaded
// limit.
const (
	Unknown Unit = 0
	Second  Unit = 1
	Minute  Unit = 2
	Hour    Unit = 3
	Day     Unit = 4
	Month   Unit = 5
	Year    Unit = 6
	Week    Unit = 7
)

var unitNames = map[string]Unit{
	"UNKNOWN": Unknown, "SECOND": Second, "MINUTE": Minute, "HOUR": Hour,
	"DAY": Day, "WEEK": Week, "MONTH": Month, "YEAR": Year,
}

// parseUnit maps a config unit to a Unit the way envoyproxy/ratelimit does:
// upper-cased, then looked up among the enum's names. ok is false for an
// unknown name and for "unknown".
func parseUnit(s string) (u Unit, ok bool) {
	u, found := unitNames[strings.ToUpper(s)]
	return u, found && u != Unknown
}

// Duration returns the window length of the unit: a month is 30 days and a
// year 365 days. It returns 0 for Unknown and for values outside the enum.
func (u Unit) Duration() time.Duration {
	const day = 24 * time.Hour
	switch u {
	case Second:
		return time.Second
	case Minute:
		return time.Minute
	case Hour:
		return time.Hour
	case Day:
		return day
	case Week:
		return 7 * day
	case Month:
		return 30 * day
	case Year:
		return 365 * day
	}
	return 0
}

// String returns the unit's name in lower case, as written in a config file
// ("second", ..., "year"), or "unknown".
func (u Unit) String() string {
	if u.Duration() == 0 {
		return "unknown"
	}
	return unitLower[u]
}

var unitLower = [...]string{Second: "second", Minute: "minute", Hour: "hour", Day: "day", Month: "month", Year: "year", Week: "week"}
