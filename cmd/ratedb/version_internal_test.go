package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// version prints one space between its fields whatever the go command
// stamped: a binary built without VCS information (go run, -buildvcs=false,
// go install of a tagged version) printed "ratedb (devel)  go1.26.8", with
// an empty third field for tools that split on single spaces.
func TestVersionOf(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "ratedb (devel)"},
		{"go run", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "ratedb (devel) go1.26.8"},
		{"no main version", &debug.BuildInfo{GoVersion: "go1.26.8"}, "ratedb (devel) go1.26.8"},
		{"go install @v1.2.0", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, "ratedb v1.2.0 go1.26.8"},
		{"go build in a clone", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261124234140-d7850b197c2a"},
			Settings: vcs("d7850b197c2aac6f572b92f90f2a14c2dfe9b5b5", "false")},
			"ratedb v0.0.0-20261124234140-d7850b197c2a d7850b197c2aac6f572b92f90f2a14c2dfe9b5b5 go1.26.8"},
		{"go build with local changes", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261124234140-d7850b197c2a+dirty"},
			Settings: vcs("d7850b197c2aac6f572b92f90f2a14c2dfe9b5b5", "true")},
			"ratedb v0.0.0-20261124234140-d7850b197c2a+dirty d7850b197c2aac6f572b92f90f2a14c2dfe9b5b5+dirty go1.26.8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, versionOf(tc.bi, tc.bi != nil))
		})
	}
}
