package main

import (
	"net/http"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestEnvoyOKNeedsAMatchedLimit feeds envoyOK the answers envoyproxy/ratelimit's
// /json handler writes (the response marshalled with protojson, as its
// NewJsonHandler does). A descriptor that matched no rule is answered 200
// and OK, with no limit and no Redis call; the old check (200 and "OK"
// anywhere in the body) counted such calls as measured ones, so a config
// the service did not load or match would have been timed as a fast limiter.
func TestEnvoyOKNeedsAMatchedLimit(t *testing.T) {
	matched := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
			Code:           rlsv3.RateLimitResponse_OK,
			CurrentLimit:   &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1_000_000, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
			LimitRemaining: 999_999,
		}},
	}
	unmatched := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK}},
	}
	over := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OVER_LIMIT,
		Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{
			Code:         rlsv3.RateLimitResponse_OVER_LIMIT,
			CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: 1, Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE},
		}},
	}
	for _, tc := range []struct {
		name   string
		status int
		resp   *rlsv3.RateLimitResponse
		want   bool
	}{
		{"allowed by the config's limit", http.StatusOK, matched, true},
		{"no rule matched: OK without a limit", http.StatusOK, unmatched, false},
		{"over the limit", http.StatusTooManyRequests, over, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := protojson.Marshal(tc.resp)
			if err != nil {
				t.Fatal(err)
			}
			if got := envoyOK(tc.status, body); got != tc.want {
				t.Errorf("envoyOK(%d, %s) = %v, want %v", tc.status, body, got, tc.want)
			}
		})
	}
}
