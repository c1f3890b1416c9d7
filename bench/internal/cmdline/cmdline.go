// Package cmdline writes the command line of a bench run into its report,
// quoted so that a POSIX shell given the line runs the command with the
// arguments the run was given.
package cmdline

import "strings"

// safe holds the bytes an argument may be made of and still be written
// unquoted: a POSIX shell gives them no meaning outside an assignment
// (which the first word, the command's name, is not).
const safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-"

// Join joins args into one line that a POSIX shell splits back into args.
// An argument that is empty or holds anything but letters, digits and
// "@%+=:,./_-" is written between single quotes, each single quote in it
// closing the quotes, escaped with a backslash, and opening them again: an
// empty value (-out "") stays an argument, and spaces, quotes, dollars,
// backslashes, globs and line breaks reach the command as they were. The
// first of args must be the command's name, never an assignment.
func Join(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, safe) == "" {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
