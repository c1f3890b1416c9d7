package main_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A stray argument is named in the usage error, but never a URL's password:
// a Cluster list written with spaces instead of commas, or a URL after a
// boolean flag, lands there.
func TestUnexpectedArgumentHidesAPassword(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--redis", "redis://:s3cret@10.0.0.1:6379", "redis://:s3cret@10.0.0.2:6379"},
		{"serve", "--fail-open", "redis://user:s3cret@10.0.0.1:6379"},
		{"serve", "--fail-open", "user:s3cret@10.0.0.1:6379"},
	} {
		_, stderr, code := runTool(t, args...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Contains(t, stderr, "unexpected argument", "%v", args)
		assert.NotContains(t, stderr, "s3cret", "%v", args)
	}
	_, stderr, _ := runTool(t, "serve", "extra")
	assert.Contains(t, stderr, `"extra"`, "an argument without credentials is still named")
}
