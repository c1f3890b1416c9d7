package grpcapi

import (
	"errors"
	"fmt"
	"sync"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Why a codec of our own: Envoy copies request header values into
// descriptor entry values byte for byte, and a header value may hold bytes
// 0x80-0xFF that are not UTF-8 (obs-text, legal in HTTP/1.1 and HTTP/2).
// Envoy's C++ protobuf sends such a proto3 string as it is (it only logs an
// error), but protobuf-go refuses to decode it, so grpc-go's own codec
// would answer the whole call INTERNAL before the Server sees it. Envoy
// treats that as a failure of the service and, with its default
// failure_mode_deny: false, lets the request through uncounted: one such
// byte in any header feeding any descriptor would bypass every limit of the
// request. codec decodes a RateLimitRequest whose only fault is such bytes
// with them kept as they are, and refuses everything else protobuf-go
// refuses.

// codec is the gRPC server's codec, named "proto" like grpc-go's own: it
// delegates to the codec grpc-go registers under that name and, when that
// refuses a RateLimitRequest at a string that is not UTF-8, decodes it
// again with unmarshalLenient, which checks the whole message. It is safe
// for concurrent use.
type codec struct {
	base encoding.CodecV2
}

var _ encoding.CodecV2 = codec{}

func newCodec() codec { return codec{base: encoding.GetCodecV2(grpcproto.Name)} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.base.Unmarshal(data, v)
	if err == nil || !isInvalidUTF8(err) {
		return err
	}
	req, ok := v.(*rlsv3.RateLimitRequest)
	if !ok || !lenientSupported() {
		return err
	}
	// data stays the caller's until Unmarshal returns; the decoded strings
	// are copies.
	return unmarshalLenient(data.Materialize(), req)
}

func (codec) Name() string { return grpcproto.Name }

// isInvalidUTF8 reports whether err is protobuf-go's error for a string
// field that is not UTF-8 (its internal error type has this method; the
// codec's test pins it). protobuf-go stops at the first such string, so
// the rest of the message is unchecked: unmarshalLenient checks all of it.
func isInvalidUTF8(err error) bool {
	var u interface{ InvalidUTF8() bool }
	return errors.As(err, &u) && u.InvalidUTF8()
}

// lenientSupported reports whether unmarshalLenient can decode every field
// of a RateLimitRequest (checked once: a newer go-control-plane could add a
// field of a kind it does not decode; the codec then refuses such requests
// as grpc-go does).
var lenientSupported = sync.OnceValue(func() bool {
	return supportedSchema((*rlsv3.RateLimitRequest)(nil).ProtoReflect().Descriptor(), map[protoreflect.FullName]bool{})
})

// supportedSchema reports whether md and the messages it holds use only
// what decodeLenient decodes: no extensions, maps, groups or oneofs (proto3
// optional fields aside); singular fields of the varint kinds below,
// strings, bytes and messages; repeated strings, bytes and messages.
func supportedSchema(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return true
	}
	seen[md.FullName()] = true
	if md.ExtensionRanges().Len() > 0 {
		return false
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() || fd.IsExtension() || (fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic()) {
			return false
		}
		switch fd.Kind() {
		case protoreflect.MessageKind:
			if !supportedSchema(fd.Message(), seen) {
				return false
			}
		case protoreflect.StringKind, protoreflect.BytesKind:
		case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Int64Kind,
			protoreflect.Uint32Kind, protoreflect.Uint64Kind:
			if fd.IsList() {
				return false // packed or not: not decoded
			}
		default:
			return false
		}
	}
	return true
}

// unmarshalLenient decodes b into req as proto.Unmarshal does, except that
// strings are kept byte for byte whether or not they are UTF-8. It returns
// an error wrapping ErrMalformedRequest for anything else proto.Unmarshal
// refuses. The message must be one that supportedSchema accepts.
func unmarshalLenient(b []byte, req *rlsv3.RateLimitRequest) error {
	proto.Reset(req)
	if err := decodeLenient(b, req.ProtoReflect(), protowire.DefaultRecursionLimit); err != nil {
		proto.Reset(req)
		return err
	}
	return nil
}

// decodeLenient merges the fields of b into m as protobuf-go's decoder
// does: a repeated field appends, a singular message merges, another
// singular field keeps its last value; a field of an unknown number, or of
// a known number with another wire type, is kept in m's unknown fields
// (its tag re-encoded, as protobuf-go does). Strings are not checked for
// UTF-8. depth bounds the nesting of messages, as protobuf-go's recursion
// limit does.
func decodeLenient(b []byte, m protoreflect.Message, depth int) error {
	if depth--; depth < 0 {
		return fmt.Errorf("%w: nested too deep", ErrMalformedRequest)
	}
	fields := m.Descriptor().Fields()
	for len(b) > 0 {
		tag, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return fmt.Errorf("%w: bad tag", ErrMalformedRequest)
		}
		b = b[n:]
		if tag>>3 < uint64(protowire.MinValidNumber) || tag>>3 > uint64(protowire.MaxValidNumber) {
			return fmt.Errorf("%w: bad field number", ErrMalformedRequest)
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		if typ == protowire.EndGroupType {
			return fmt.Errorf("%w: unexpected end of group", ErrMalformedRequest)
		}
		n = -1 // an unknown field
		if fd := fields.ByNumber(num); fd != nil {
			var err error
			if n, err = decodeField(b, m, fd, typ, depth); err != nil {
				return err
			}
		}
		if n < 0 {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("%w: bad field", ErrMalformedRequest)
			}
			// Appended in place: every unknown field of the request was
			// set here since unmarshalLenient reset it, so the capacity
			// past them is this decoder's own. (Copied each time, as a
			// three-index slice did, a 1 MiB request of 2-byte unknown
			// fields took over a minute of CPU.)
			u := protowire.AppendTag(m.GetUnknown(), num, typ)
			m.SetUnknown(append(u, b[:n]...))
		}
		b = b[n:]
	}
	return nil
}

// decodeField decodes the value of the known field fd at the start of b,
// of wire type typ, into m, and returns its length, or -1 when typ is not
// fd's wire type (the field is then an unknown field).
func decodeField(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor, typ protowire.Type, depth int) (int, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.StringKind, protoreflect.BytesKind:
		if typ != protowire.BytesType {
			return -1, nil
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, fmt.Errorf("%w: bad length", ErrMalformedRequest)
		}
		var val protoreflect.Value
		switch {
		case fd.Kind() == protoreflect.StringKind:
			val = protoreflect.ValueOfString(string(v))
		case fd.Kind() == protoreflect.BytesKind:
			val = protoreflect.ValueOfBytes(append([]byte{}, v...))
		case fd.IsList():
			val = m.Mutable(fd).List().NewElement()
			if err := decodeLenient(v, val.Message(), depth); err != nil {
				return 0, err
			}
		default: // a singular message merges into the one already there
			return n, decodeLenient(v, m.Mutable(fd).Message(), depth)
		}
		if fd.IsList() {
			m.Mutable(fd).List().Append(val)
		} else {
			m.Set(fd, val)
		}
		return n, nil
	}
	if typ != protowire.VarintType {
		return -1, nil
	}
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, fmt.Errorf("%w: bad varint", ErrMalformedRequest)
	}
	var val protoreflect.Value
	switch fd.Kind() {
	case protoreflect.BoolKind:
		val = protoreflect.ValueOfBool(protowire.DecodeBool(v))
	case protoreflect.EnumKind:
		val = protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(v)))
	case protoreflect.Int32Kind:
		val = protoreflect.ValueOfInt32(int32(v))
	case protoreflect.Int64Kind:
		val = protoreflect.ValueOfInt64(int64(v))
	case protoreflect.Uint32Kind:
		val = protoreflect.ValueOfUint32(uint32(v))
	case protoreflect.Uint64Kind:
		val = protoreflect.ValueOfUint64(v)
	default:
		return 0, fmt.Errorf("%w: field kind %v not supported", ErrMalformedRequest, fd.Kind())
	}
	m.Set(fd, val)
	return n, nil
}
