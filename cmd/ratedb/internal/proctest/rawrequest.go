package proctest

import (
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// MarshalAnyStrings marshals req as proto.Marshal does, except that its
// domain and its entries' keys and values may hold any bytes, as Envoy
// sends them (proto.Marshal refuses strings that are not UTF-8): they are
// encoded by hand, after the other fields (the order of fields does not
// change what a message decodes to).
func MarshalAnyStrings(req *rlsv3.RateLimitRequest) ([]byte, error) {
	rest := proto.Clone(req).(*rlsv3.RateLimitRequest)
	rest.Domain, rest.Descriptors = "", nil
	b, err := proto.Marshal(rest)
	if err != nil {
		return nil, err
	}
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, req.GetDomain())
	for _, d := range req.GetDescriptors() {
		rest := proto.Clone(d).(*ratelimitv3.RateLimitDescriptor)
		rest.Entries = nil
		db, err := proto.Marshal(rest)
		if err != nil {
			return nil, err
		}
		for _, e := range d.GetEntries() {
			var eb []byte
			eb = protowire.AppendTag(eb, 1, protowire.BytesType)
			eb = protowire.AppendString(eb, e.GetKey())
			eb = protowire.AppendTag(eb, 2, protowire.BytesType)
			eb = protowire.AppendString(eb, e.GetValue())
			db = protowire.AppendTag(db, 1, protowire.BytesType)
			db = protowire.AppendBytes(db, eb)
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, db)
	}
	return b, nil
}
