package main

import (
	"context"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// answerServer answers the first call as a rule that counted it would (OK
// with its limit), and every later one with later's answer.
type answerServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
	calls atomic.Int64
	later func() *rlsv3.RateLimitResponse
}

func (s *answerServer) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if s.calls.Add(1) == 1 {
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
			Code:         rlsv3.RateLimitResponse_OK,
			CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1_000_000_000, Unit: rlsv3.RateLimitResponse_RateLimit_HOUR},
		}}}, nil
	}
	return s.later(), nil
}

// TestAnswersWithoutALimitFail: a call that ratedb or envoyproxy/ratelimit
// answers OK without a limit matched no rule and was counted by none. Only
// the first call was checked, so a target that stopped matching after it
// was timed as a fast limiter; and a first answer with no status at all
// panicked the command (an index out of range), leaving the target's
// servers running. Both must now fail the measurement, and a target whose
// every answer names its limit must still pass.
func TestAnswersWithoutALimitFail(t *testing.T) {
	withLimit := func() *rlsv3.RateLimitResponse {
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
			Code:         rlsv3.RateLimitResponse_OK,
			CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1_000_000_000, Unit: rlsv3.RateLimitResponse_RateLimit_HOUR},
		}}}
	}
	noLimit := func() *rlsv3.RateLimitResponse {
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK}}}
	}
	noStatus := func() *rlsv3.RateLimitResponse {
		return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	}
	o := options{workers: 2, conns: 1, warmup: 0, duration: 100 * time.Millisecond}
	for _, tc := range []struct {
		name    string
		first   bool // the first answer is later's too
		later   func() *rlsv3.RateLimitResponse
		wantErr string
	}{
		{"every answer names its limit", false, withLimit, ""},
		{"later answers without a limit", false, noLimit, "without a limit"},
		{"a first answer without a status", true, noStatus, "first call matched no limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &answerServer{later: tc.later}
			if tc.first {
				srv.calls.Store(1)
			}
			g := grpc.NewServer()
			rlsv3.RegisterRateLimitServiceServer(g, srv)
			go func() { _ = g.Serve(l) }()
			defer g.Stop()
			r, err := measure(context.Background(), o, "ratedb", l.Addr().String(), []int{os.Getpid()}, []string{"a", "b"})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("measure: %v", err)
			case tc.wantErr == "" && r.calls == 0:
				t.Fatalf("measure made no call: %+v", r)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("measure returned %v (%d calls), want an error saying %q", err, r.calls, tc.wantErr)
			}
		})
	}
}
