package grpcapi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/grpcapi"
)

// BenchmarkServer_Check is the adapter and the core without gRPC: one
// descriptor, 10,000 values, a limit never reached.
func BenchmarkServer_Check(b *testing.B) {
	cfg, err := envoyconf.Parse([]envoyconf.File{{Name: "b.yaml", Data: []byte(
		"domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1000000000}\n")}})
	if err != nil {
		b.Fatal(err)
	}
	db, err := ratedb.Open(filepath.Join(b.TempDir(), "s.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	srv := grpcapi.New(core.New(core.DBStore{DB: db}, core.Options{}), cfg, nil)
	reqs := make([]*rlsv3.RateLimitRequest, 10000)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", fmt.Sprintf("user-%06d", i))}}
		if _, err := srv.Check(context.Background(), reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		resp, err := srv.Check(context.Background(), reqs[i%len(reqs)])
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			b.Fatal(err, resp)
		}
	}
}
