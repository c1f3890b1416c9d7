package httpapi

// Exported for tests.
var (
	DecodeCheckFast = decodeCheckFast
	DecodeCheckJSON = decodeCheckJSON
	ErrBadRequest   = errBadRequest
)
