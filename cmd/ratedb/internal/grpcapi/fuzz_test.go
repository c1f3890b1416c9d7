package grpcapi_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
)

// FuzzCheck decodes arbitrary bytes as a RateLimitRequest, as the gRPC
// server does, and checks it: no panic, an answer with one status per
// descriptor, or an invalid-request error that created no state.
func FuzzCheck(f *testing.F) {
	seeds := []*rlsv3.RateLimitRequest{
		{Domain: "features", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("tenant", "acme", "path", "/api/x")}},
		{Domain: "another", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("key2", "a"), desc("key3", "b")}},
		{Domain: "basic", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries:    desc("x", "y").Entries,
			Limit:      &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_DAY},
			HitsAddend: wrapperspb.UInt64(0),
		}}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	cfg, err := envoyconf.Load(integrationDir)
	if err != nil {
		f.Fatal(err)
	}
	db, err := ratedb.Open(filepath.Join(f.TempDir(), "state.db"), &ratedb.Options{MaxHotKeys: 10000})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	srv := grpcapi.New(core.New(core.DBStore{DB: db}, core.Options{}), cfg, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rlsv3.RateLimitRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		before := db.Stats()
		resp, err := srv.Check(context.Background(), &req)
		if err != nil {
			if !errors.Is(err, grpcapi.ErrInvalidRequest) {
				t.Fatalf("unexpected error: %v", err)
			}
			// A refused request creates no state: no hit decided, no
			// window created (the janitor and evictions only remove).
			after := db.Stats()
			if after.Allowed != before.Allowed || after.Denied != before.Denied || after.WindowsInMemory > before.WindowsInMemory {
				t.Fatalf("a refused request (%v) changed the state: %d/%d/%d allowed/denied/windows, was %d/%d/%d", err,
					after.Allowed, after.Denied, after.WindowsInMemory, before.Allowed, before.Denied, before.WindowsInMemory)
			}
			return
		}
		if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(req.GetDescriptors()))
		}
	})
}
