package grpcapi

import "errors"

// ErrInvalidRequest is the cause of an INVALID_ARGUMENT answer: an empty
// domain, no descriptors, too many descriptors or entries, a limit override
// with an unknown unit, or a hits_addend too large. The
// gRPC status message says which. Use errors.Is on the error returned by
// Server.Check.
var ErrInvalidRequest = errors.New("grpcapi: invalid request")
