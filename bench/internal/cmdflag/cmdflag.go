// Package cmdflag holds the checks of flag values that the bench commands
// share, made before a command builds or starts anything.
package cmdflag

import (
	"fmt"
	"slices"
	"strings"
)

// NoArgs returns an error naming the first of args, the arguments left
// after a command's flags, if any: every setting of a bench command is a
// flag.
func NoArgs(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q (every setting is a flag: -h lists them)", args[0])
	}
	return nil
}

// Names returns an error if list, the comma-separated value of the flag
// named flag, holds a name not in known, or a name twice.
func Names(flag, list string, known []string) error {
	seen := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if !slices.Contains(known, n) {
			return fmt.Errorf("-%s: unknown %s %q (want some of %s)", flag, strings.TrimSuffix(flag, "s"), n, strings.Join(known, ", "))
		}
		if seen[n] {
			return fmt.Errorf("-%s names %s twice", flag, n)
		}
		seen[n] = true
	}
	return nil
}
