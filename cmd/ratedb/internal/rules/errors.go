package rules

import (
	"errors"
	"strings"
)

var (
	// ErrInvalidRule is returned, wrapped in a *ValidationError listing
	// every problem, for a rule or rule file that does not validate.
	// Nothing is changed. Match it with errors.Is.
	ErrInvalidRule = errors.New("rules: invalid rule")

	// ErrNotFound is returned by Get and Delete for a name no rule has.
	ErrNotFound = errors.New("rules: no such rule")

	// ErrRulesFileFull is returned (wrapped) by FileStorage.Save (and by
	// the Redis storage's Update, whose value has the same bound), and so
	// by a change of the rules that adds or grows one (Put, Import), when
	// the rules would take more than MaxFileSize bytes in the rules file
	// (or in the Redis value). Nothing is saved, and the rules served stay
	// as they were. Match it with errors.Is.
	ErrRulesFileFull = errors.New("rules: the stored rules would be larger than their bound of 256 MiB (268435456 bytes)")
)

// ValidationError lists every problem of an invalid rule or rule file. It
// wraps ErrInvalidRule.
type ValidationError struct {
	// Problems are human-readable, one per problem, in field order.
	Problems []string
}

// Error joins the problems.
func (e *ValidationError) Error() string {
	return "rules: invalid rule: " + strings.Join(e.Problems, "; ")
}

// Unwrap returns ErrInvalidRule.
func (e *ValidationError) Unwrap() error { return ErrInvalidRule }
