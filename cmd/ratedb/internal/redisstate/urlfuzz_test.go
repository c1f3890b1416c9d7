package redisstate_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/redisstate"
)

// FuzzNewClient feeds NewClient arbitrary --redis values holding the
// password "Sup3rSecret" somewhere (the fuzzer varies what surrounds it, so
// it lands in a password, a user, a host, a port, a path or a query): it
// never panics, and an error never repeats it. (A value naming
// min_idle_conns is skipped: go-redis would dial its host at once.)
func FuzzNewClient(f *testing.F) {
	const secret = "Sup3rSecret"
	for _, spec := range []string{
		"redis://:Sup3rSecret/xyz+w==@redis.internal:6379/0",
		"redis://user:Sup3rSecret#x@redis.internal:6379",
		"redis://user:Sup3rSecret?x@redis.internal:6379",
		"redis://a:1,redis://:Sup3rSecret/xyz@b:2",
		"user:Sup3rSecret@a:1,b:2",
		"a:1,:Sup3rSecret@b:2",
		"redis://a:1/2,redis://:Sup3rSecret@b:2/2",
		"redis://a:1?dial_timeout=1s&password=Sup3rSecret,b:2",
		"rediss://:Sup3rSecret@a:1,redis://:Sup3rSecret@b:2",
		"redis://u1:Sup3rSecret@a:1,redis://u2:Sup3rSecret@b:2",
		"unix://:Sup3rSecret@/tmp/redis.sock,a:1",
		"unix://:Sup3rSecret@/tmp/redis.sock?db=3",
		"redis://:Sup3rSecret@a:1/0,redis://:Sup3rSecret@b:2",
		"rediss://:Sup3rSecret@a:1,b:2,c:3",
		"redis://Sup3rSecret:6379/1?protocol=9",
		"redis://:Sup3rSecret@[::1]:99999/x",
	} {
		before, after, _ := strings.Cut(spec, secret)
		f.Add(before, after)
	}
	f.Fuzz(func(t *testing.T, before, after string) {
		spec := before + secret + after
		if strings.Contains(unescape(spec), "idle") {
			return
		}
		c, err := redisstate.NewClient(spec)
		if err != nil {
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error repeats the password: %v", err)
			}
			return
		}
		_ = c.Close()
	})
}

// unescape decodes every valid %XX of s, as a query's parser would, and
// keeps the rest as it is.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
