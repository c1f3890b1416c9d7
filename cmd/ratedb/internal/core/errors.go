package core

import "errors"

// ErrInvalidCheck is returned, wrapped with what was wrong, for a check set
// that cannot be decided: no checks, an empty or oversized key, a negative
// cost, or a limit without tiers, with a negative limit or an unknown
// algorithm. Nothing is counted. Match it with errors.Is.
var ErrInvalidCheck = errors.New("core: invalid check")
