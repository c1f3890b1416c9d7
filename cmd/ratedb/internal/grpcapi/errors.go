package grpcapi

import "errors"

// ErrInvalidRequest is the cause of an INVALID_ARGUMENT answer: an empty
// domain, no descriptors, too many descriptors or entries, a limit override
// with an unknown unit or a unit_multiplier of 0, too large, or giving a
// window length past the 1024 that overrides may use, or a hits_addend too
// large. The
// gRPC status message says which. Use errors.Is on the error returned by
// Server.Check.
var ErrInvalidRequest = errors.New("grpcapi: invalid request")

// ErrMalformedRequest is the cause of an INTERNAL answer (grpc-go's status
// for a message its codec cannot decode) to a RateLimitRequest that is not
// valid protobuf, found while decoding one that holds strings that are not
// UTF-8 (which are themselves accepted as they are).
var ErrMalformedRequest = errors.New("grpcapi: malformed request message")
