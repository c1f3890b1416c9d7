package redisstore

import "github.com/redis/go-redis/v9"

// Hooks for the tests that drive the scripts directly (pipelined, to reach
// a million hits quickly): the exact keys and arguments a call sends.

// CountScript is the script of Hit and Inc.
var CountScript = redis.NewScript(countScript.src)

// HitArgs returns the keys and arguments Hit(key, limit, increment) sends.
func (w *Window) HitArgs(key string, limit, increment int64) ([]string, []any) {
	now, _ := w.sp.s.nowArg()
	return w.sp.countArgs(now, key, true, increment, []int64{limit})
}

// HitArgs returns the keys and arguments Hit(key, increment) sends.
func (l *Layered) HitArgs(key string, increment int64) ([]string, []any) {
	now, _ := l.sp.s.nowArg()
	return l.sp.countArgs(now, key, true, increment, l.limits())
}
