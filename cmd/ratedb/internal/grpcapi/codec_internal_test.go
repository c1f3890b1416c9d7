package grpcapi

import (
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratedb/ratedb/cmd/ratedb/internal/proctest"
	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// marshalAnyStrings is proctest.MarshalAnyStrings, failing tb on error.
func marshalAnyStrings(tb testing.TB, req *rlsv3.RateLimitRequest) []byte {
	tb.Helper()
	b, err := proctest.MarshalAnyStrings(req)
	require.NoError(tb, err)
	return b
}

func TestInvalidUTF8IsRecognised(t *testing.T) {
	// protobuf-go refuses a proto3 string that is not UTF-8 with an error
	// isInvalidUTF8 recognises, through grpc-go's registered codec as
	// directly. If an upgrade changes that error, this fails rather than
	// the codec silently answering INTERNAL again.
	raw := marshalAnyStrings(t, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "value-\xff\xfe"}}},
	}})
	var got rlsv3.RateLimitRequest
	err := proto.Unmarshal(raw, &got)
	require.Error(t, err)
	assert.True(t, isInvalidUTF8(err), "%v", err)
	err = encoding.GetCodecV2("proto").Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &got)
	require.Error(t, err)
	assert.True(t, isInvalidUTF8(err), "%v", err)

	// Other faults are not mistaken for it.
	for _, bad := range [][]byte{{0x0a, 0x05, 'e'}, {0x0b}, {0x0c}, {0xff}} {
		err := proto.Unmarshal(bad, &got)
		require.Error(t, err)
		assert.False(t, isInvalidUTF8(err), "%v", err)
	}
	assert.True(t, lenientSupported(), "the lenient decoder decodes every field of this go-control-plane's RateLimitRequest")
}

func TestCodecKeepsBytesThatAreNotUTF8(t *testing.T) {
	c := newCodec()
	require.Equal(t, "proto", c.Name())
	want := &rlsv3.RateLimitRequest{Domain: "dom\xffin", HitsAddend: 7, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{
			Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
				{Key: "remote_address", Value: "\xc3\x28va\xa0ue"},
				{Key: "key-\xed\xa0\x80", Value: "v"}, // a UTF-16 surrogate
			},
			Limit:          &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_DAY},
			HitsAddend:     wrapperspb.UInt64(2),
			IsNegativeHits: true,
		},
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user-agent", Value: "Mozilla\xc0\xaf"}}}, // an overlong "/"
	}}
	raw := marshalAnyStrings(t, want)
	var got rlsv3.RateLimitRequest
	require.NoError(t, c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &got))
	assert.True(t, proto.Equal(want, &got), "got %v", &got)

	// A fault after the string protobuf-go stopped at is still a fault.
	for name, tail := range map[string][]byte{
		"cut field":       {0x12, 0x05, 0x0a},
		"unknown varint":  {0x28, 0xff},
		"end of no group": {0x0c},
		"wire type 7":     {0x0f},
		"field number 0":  {0x02, 0x00},
		"open group":      {0x2b},
	} {
		err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(append(raw[:len(raw):len(raw)], tail...))}, &got)
		assert.ErrorIs(t, err, ErrMalformedRequest, name)
		assert.True(t, proto.Equal(&rlsv3.RateLimitRequest{}, &got), "%s: nothing decoded is kept", name)
	}

	// Only a RateLimitRequest is decoded leniently.
	h, err := proto.Marshal(&healthpb.HealthCheckRequest{Service: "placeholder"})
	require.NoError(t, err)
	h = []byte(strings.Replace(string(h), "placeholder", "placeh\xfflder", 1))
	err = c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(h)}, &healthpb.HealthCheckRequest{})
	assert.True(t, isInvalidUTF8(err), "%v", err)

	// Marshal is grpc-go's.
	out, err := c.Marshal(&rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT})
	require.NoError(t, err)
	var resp rlsv3.RateLimitResponse
	require.NoError(t, proto.Unmarshal(out.Materialize(), &resp))
	assert.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
}

// bytesSchema returns a copy of md's schema, and of every message it holds,
// in which every string field is a bytes field: protobuf-go decodes with it
// exactly what it decodes with md, strings that are not UTF-8 included.
func bytesSchema(t testing.TB, md protoreflect.MessageDescriptor) protoreflect.MessageDescriptor {
	t.Helper()
	const pkg = "bytesschema"
	flat := func(n protoreflect.FullName) string { return strings.ReplaceAll(string(n), ".", "_") }
	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("bytesschema.proto"), Package: proto.String(pkg), Syntax: proto.String("proto3"),
	}
	seen := map[protoreflect.FullName]bool{}
	var add func(md protoreflect.MessageDescriptor)
	add = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		mp := &descriptorpb.DescriptorProto{Name: proto.String(flat(md.FullName()))}
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			f := protodesc.ToFieldDescriptorProto(fd)
			f.Options = nil
			f.OneofIndex = nil // no oneofs (lenientSupported); proto3 optional is kept by Proto3Optional
			if f.GetProto3Optional() {
				f.OneofIndex = proto.Int32(int32(len(mp.OneofDecl)))
				mp.OneofDecl = append(mp.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String("_" + f.GetName())})
			}
			switch fd.Kind() {
			case protoreflect.StringKind:
				f.Type = descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
			case protoreflect.EnumKind: // an open enum decodes as an int32
				f.Type, f.TypeName = descriptorpb.FieldDescriptorProto_TYPE_INT32.Enum(), nil
			case protoreflect.MessageKind:
				f.TypeName = proto.String("." + pkg + "." + flat(fd.Message().FullName()))
				add(fd.Message())
			}
			mp.Field = append(mp.Field, f)
		}
		fdp.MessageType = append(fdp.MessageType, mp)
	}
	add(md)
	fd, err := protodesc.NewFile(fdp, nil)
	require.NoError(t, err)
	return fd.Messages().ByName(protoreflect.Name(flat(md.FullName())))
}

// fromBytesSchema copies src, a message of bytesSchema(dst's schema), into
// dst, bytes fields into string fields, and the unknown fields of both
// with their tags in the shortest encoding (protobuf-go's generated code
// re-encodes them; its reflective decoder, which decodes src, keeps them).
func fromBytesSchema(src, dst protoreflect.Message) {
	src.Range(func(sfd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fd := dst.Descriptor().Fields().ByNumber(sfd.Number())
		conv := func(v protoreflect.Value) protoreflect.Value {
			switch fd.Kind() {
			case protoreflect.StringKind:
				return protoreflect.ValueOfString(string(v.Bytes()))
			case protoreflect.EnumKind:
				return protoreflect.ValueOfEnum(protoreflect.EnumNumber(v.Int()))
			}
			return v
		}
		switch {
		case fd.IsList():
			l := dst.Mutable(fd).List()
			for i := range v.List().Len() {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fromBytesSchema(v.List().Get(i).Message(), e.Message())
					l.Append(e)
				} else {
					l.Append(conv(v.List().Get(i)))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			fromBytesSchema(v.Message(), dst.Mutable(fd).Message())
		default:
			dst.Set(fd, conv(v))
		}
		return true
	})
	dst.SetUnknown(shortTags(src.GetUnknown()))
}

// shortTags re-encodes the tags of well-formed unknown fields b.
func shortTags(b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		out = protowire.AppendTag(out, num, typ)
		out = append(out, b[n:n+m]...)
		b = b[n+m:]
	}
	return out
}

// FuzzLenientDecode checks the server's codec against protobuf-go: for any
// bytes proto.Unmarshal decodes, the codec decodes a proto.Equal
// RateLimitRequest; it decodes exactly the bytes protobuf-go decodes with
// a copy of the schema whose strings are bytes (so it refuses everything
// protobuf-go refuses but strings that are not UTF-8), to the same values.
func FuzzLenientDecode(f *testing.F) {
	seeds := []*rlsv3.RateLimitRequest{
		{Domain: "edge", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}},
			{
				Entries:        []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user-agent-x", Value: "Mozilla/5.0"}, {Key: "k", Value: ""}},
				Limit:          &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_HOUR, UnitMultiplier: wrapperspb.UInt32(2)},
				HitsAddend:     wrapperspb.UInt64(1 << 40),
				IsNegativeHits: true,
			},
		}},
		{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		require.NoError(f, err)
		f.Add(b)
		bad := proto.Clone(s).(*rlsv3.RateLimitRequest)
		bad.Domain += "\xff"
		for _, d := range bad.Descriptors {
			for _, e := range d.Entries {
				e.Key, e.Value = "\xfe"+e.Key, e.Value+"\xc3"
			}
		}
		f.Add(marshalAnyStrings(f, bad))
		// Unknown fields, a wrong wire type for a known field, a field
		// given twice.
		f.Add(append(b, 0x28, 0x01, 0x3a, 0x01, 'x', 0x1a, 0x01, 'x', 0x0d, 1, 2, 3, 4, 0x0a, 0x01, 'y', 0x18, 0x02))
		f.Add(append(b, 0xab, 0x80, 0x00, 0x08, 0x01, 0xac, 0x00)) // a group, its tags longer than need be
	}
	// A descriptor's limit in two parts (merged), a unit and a
	// requests_per_unit past their types (truncated), hits_addend 2^32+5.
	f.Add([]byte{
		0x0a, 0x01, 0xff, 0x18, 0x85, 0x80, 0x80, 0x80, 0x10,
		0x12, 0x17,
		0x12, 0x11, 0x08, 0x85, 0x80, 0x80, 0x80, 0x10, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
		0x12, 0x02, 0x10, 0x03,
	})
	f.Add([]byte{0x12, 0x04, 0x0a, 0x02, 0x0a, 0xff})
	f.Add([]byte{0x0a, 0x01, 0xff, 0x12, 0x03, 0x0a})
	schema := bytesSchema(f, (*rlsv3.RateLimitRequest)(nil).ProtoReflect().Descriptor())
	c := newCodec()
	f.Fuzz(func(t *testing.T, data []byte) {
		var strict, lenient, viaCodec rlsv3.RateLimitRequest
		errStrict := proto.Unmarshal(data, &strict)
		dyn := dynamicpb.NewMessage(schema)
		errBytes := proto.Unmarshal(data, dyn)
		errLenient := unmarshalLenient(data, &lenient)
		err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &viaCodec)
		if errStrict == nil {
			require.NoError(t, errLenient)
			require.True(t, proto.Equal(&strict, &lenient), "strict %v\nlenient %v", &strict, &lenient)
		}
		if errBytes != nil {
			require.ErrorIs(t, errLenient, ErrMalformedRequest, "decoded what protobuf-go refuses: %v", errBytes)
			require.Error(t, err, "decoded what protobuf-go refuses: %v", errBytes)
			if isInvalidUTF8(errStrict) {
				require.ErrorIs(t, err, ErrMalformedRequest)
			}
			return
		}
		require.NoError(t, errLenient, "refused what protobuf-go decodes with strings as bytes")
		var want rlsv3.RateLimitRequest
		fromBytesSchema(dyn, want.ProtoReflect())
		require.True(t, proto.Equal(&want, &lenient), "want %v\nlenient %v", &want, &lenient)
		require.NoError(t, err, "the codec refused what protobuf-go decodes with strings as bytes")
		require.True(t, proto.Equal(&want, &viaCodec), "want %v\ncodec %v", &want, &viaCodec)
	})
}

// The lenient decoder's work is linear in the request, as protobuf-go's
// is: a request that is not UTF-8 made of many unknown fields, at the top
// and in a descriptor's limit given many times (merged), decodes to what
// protobuf-go decodes, with a few allocations per size doubling, not one
// copy of the unknown fields so far per field (a 1 MiB request of them
// took over a minute of CPU).
func TestLenientDecodeIsLinearInUnknownFields(t *testing.T) {
	const n = 4096
	var d []byte
	for range n {
		d = protowire.AppendTag(d, 2, protowire.BytesType) // limit
		d = protowire.AppendBytes(d, []byte{15 << 3, 0})   // holding field 15, unknown
	}
	raw := protowire.AppendTag(nil, 1, protowire.BytesType)
	raw = protowire.AppendString(raw, "\xff")
	raw = protowire.AppendTag(raw, 2, protowire.BytesType)
	raw = protowire.AppendBytes(raw, d)
	for range n {
		raw = protowire.AppendTag(raw, 15, protowire.VarintType)
		raw = protowire.AppendVarint(raw, 0)
	}
	c := newCodec()
	var got rlsv3.RateLimitRequest
	allocs := testing.AllocsPerRun(10, func() {
		require.NoError(t, c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &got))
	})
	valid := append([]byte(nil), raw...)
	valid[2] = 'x'
	var want rlsv3.RateLimitRequest
	require.NoError(t, proto.Unmarshal(valid, &want))
	want.Domain = "\xff"
	assert.True(t, proto.Equal(&want, &got), "decoded as protobuf-go does")
	assert.Len(t, got.ProtoReflect().GetUnknown(), 2*n)
	assert.Less(t, allocs, float64(n/8), "allocations to decode %d unknown fields and %d merged limits", n, n)
}
