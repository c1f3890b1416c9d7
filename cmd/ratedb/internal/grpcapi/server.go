package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratedb/ratedb"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/core"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/envoyconf"
	"github.com/ratedb/ratedb/cmd/ratedb/internal/logthrottle"
)

// Request bounds: Envoy sends a handful of descriptors of a few entries.
const (
	// MaxDescriptors is the most descriptors one request may carry.
	MaxDescriptors = 64
	// MaxEntries is the most entries one descriptor may carry.
	MaxEntries = 32
)

// Options configures a Server. The zero value selects every default.
type Options struct {
	// Independent decides every descriptor of a request on its own, as
	// envoyproxy/ratelimit does: a descriptor within its limit is counted
	// even when another descriptor of the same request is over its limit.
	// Default false: a request's descriptors are decided all-or-nothing.
	Independent bool
	// Clock is the time duration_until_reset is measured from: the clock
	// of the store's windows (with --redis, Redis's as followed by a
	// redisstate.Clock). Default: the wall time at New plus the monotonic
	// time since, which follows no step of the wall clock.
	Clock func() time.Time
	// Logger receives config reload messages (never descriptor values).
	// Default slog.Default().
	Logger *slog.Logger
	// Load says which files Reload reads from a config directory.
	Load envoyconf.LoadOptions
	// ShadowMode answers OK overall whatever the limits decide, as
	// envoyproxy/ratelimit's SHADOW_MODE=true: the descriptors' statuses
	// and their counting are those the request would get without it (so
	// in all-or-nothing mode a request over a limit passes uncounted).
	// Default false.
	ShadowMode bool
	// QuotaMode makes every limit, per-request overrides included, a
	// quota_mode limit, as envoyproxy/ratelimit's QUOTA_MODE=true.
	// Default false.
	QuotaMode bool
}

// Server implements envoy.service.ratelimit.v3.RateLimitService on a core.
// It is safe for concurrent use; SetConfig may run at any time and applies
// atomically to the requests that start after it.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer
	core      *core.Core
	opts      Options
	cfg       atomic.Pointer[compiled]
	overrides overrides
	storeLog  logthrottle.Throttle // of the "store failed" lines
}

var _ rlsv3.RateLimitServiceServer = (*Server)(nil)

// New returns a Server deciding through c with the rules of cfg. cfg may be
// nil: every descriptor then answers OK with no limit until SetConfig.
func New(c *core.Core, cfg *envoyconf.Config, opts *Options) *Server {
	s := &Server{core: c}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Clock == nil {
		// The wall time at New plus Go's monotonic time since, as the HTTP
		// API measures reset_in_second: it follows no wall-clock step.
		start := time.Now()
		s.opts.Clock = func() time.Time { return start.Add(time.Since(start)) }
	}
	s.storeLog.Now = s.opts.Clock
	if s.opts.Logger == nil {
		s.opts.Logger = slog.Default()
	}
	if cfg == nil {
		cfg, _ = envoyconf.Parse(nil)
	}
	s.SetConfig(cfg)
	return s
}

// SetConfig replaces the rules atomically. Counts are kept: a rule's
// counters are identified by its descriptor and unit, not by its limit.
func (s *Server) SetConfig(cfg *envoyconf.Config) { s.cfg.Store(compile(cfg, s.opts.QuotaMode)) }

// Config returns the rules in use.
func (s *Server) Config() *envoyconf.Config { return s.cfg.Load().cfg }

// ShouldRateLimit implements the v3 RateLimitService. Errors are gRPC
// statuses: INVALID_ARGUMENT for a malformed request (nothing counted),
// UNAVAILABLE when the store failed, CANCELED or DEADLINE_EXCEEDED when the
// caller gave up (its context ended, or its deadline passed), whatever the
// store's call ended with: that is not logged as a store failure.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp, err := s.Check(ctx, req)
	if err != nil {
		st := toStatus(err)
		if status.Code(st) == codes.Unavailable {
			if gone := core.CallerGaveUp(ctx); gone != nil {
				// redisstore reports a call that its caller's context
				// ended as ErrUnavailable too; Redis did not fail (Envoy
				// gave up at its rate-limit timeout, 20 ms by default).
				return nil, toStatus(gone)
			}
			// One line a second: while the store is down every call
			// fails, and a line each would let callers fill the log.
			if ok, held := s.storeLog.Allow(); ok {
				s.opts.Logger.Warn("envoy rate limit: store failed", "err", err, "similar_lines_held_back", held)
			}
		}
		return nil, st
	}
	return resp, nil
}

// Check answers a request like ShouldRateLimit but returns plain errors:
// ErrInvalidRequest (wrapped) for a malformed request, the core's error
// otherwise.
func (s *Server) Check(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	domain := req.GetDomain()
	descs := req.GetDescriptors()
	switch {
	case domain == "":
		return nil, fmt.Errorf("%w: rate limit domain must not be empty", ErrInvalidRequest)
	case len(descs) == 0:
		return nil, fmt.Errorf("%w: rate limit descriptor list must not be empty", ErrInvalidRequest)
	case len(descs) > MaxDescriptors:
		return nil, fmt.Errorf("%w: %d descriptors (at most %d)", ErrInvalidRequest, len(descs), MaxDescriptors)
	}
	cfg := s.cfg.Load()
	known := cfg.cfg.HasDomain(domain)
	defaultCost := max(1, int64(req.GetHitsAddend()))

	rules := make([]*rule, len(descs))
	var replaced map[string]bool
	var entries []envoyconf.Entry
	var shares [][]string
	// The limit overrides are looked up (which may take one of the window
	// lengths they share, see maxOverrideWindows) only once the whole
	// request is known to be valid: a refused request takes none.
	var ovs []overrideKey
	for i, d := range descs {
		if err := validDescriptor(i, d); err != nil {
			return nil, err
		}
		if !known {
			continue
		}
		if o := d.GetLimit(); o != nil {
			unit := envoyconf.Unit(o.GetUnit())
			if unit.Duration() == 0 {
				return nil, fmt.Errorf("%w: descriptor %d: limit override with unknown unit %d", ErrInvalidRequest, i, o.GetUnit())
			}
			mult := uint32(1)
			if m := o.GetUnitMultiplier(); m != nil {
				// Envoy's proto requires at least 1 when it is given.
				if mult = m.GetValue(); mult == 0 || unit.Duration() > math.MaxInt64/time.Duration(mult) {
					return nil, fmt.Errorf("%w: descriptor %d: limit override with unit_multiplier %d", ErrInvalidRequest, i, mult)
				}
			}
			if h := d.GetHitsAddend(); h != nil && h.GetValue() > math.MaxInt64 {
				return nil, fmt.Errorf("%w: descriptor %d: hits_addend too large", ErrInvalidRequest, i)
			}
			if ovs == nil {
				ovs = make([]overrideKey, len(descs))
			}
			ovs[i] = overrideKey{o.GetRequestsPerUnit(), unit, mult}
			continue
		}
		entries = entries[:0]
		for _, e := range d.GetEntries() {
			entries = append(entries, envoyconf.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		m := cfg.cfg.Match(domain, entries)
		if m.Limit == nil {
			continue
		}
		r := cfg.rules[m.Limit]
		rules[i] = r
		if m.Share != nil {
			if shares == nil {
				shares = make([][]string, len(descs))
			}
			shares[i] = m.Share
		}
		for _, name := range r.replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[name] = true
		}
	}

	for i, d := range descs {
		// A descriptor's hits_addend is refused where a limit applies.
		if r := rules[i]; r != nil && !r.unlimited && (r.name == "" || !replaced[r.name]) {
			if h := d.GetHitsAddend(); h != nil && h.GetValue() > math.MaxInt64 {
				return nil, fmt.Errorf("%w: descriptor %d: hits_addend too large", ErrInvalidRequest, i)
			}
		}
	}
	if ovs != nil {
		if i, ok := s.overrides.getAll(ovs, rules, s.opts.QuotaMode); !ok {
			return nil, fmt.Errorf("%w: descriptor %d: limit override with unit_multiplier %d: its window length would be one more than the %d that overrides may use", ErrInvalidRequest, i, ovs[i].mult, maxOverrideWindows)
		}
	}

	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(descs)),
	}
	checks := make([]core.Check, 0, len(descs))
	owner := make([]int, 0, len(descs)) // descriptor index of each check
	for i, d := range descs {
		r := rules[i]
		switch {
		case r != nil && r.unlimited:
			// Unlimited even when another limit replaces it, as
			// envoyproxy/ratelimit answers.
			resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{
				Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32,
			}
		case r == nil || (r.name != "" && replaced[r.name]):
			resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		default:
			cost := defaultCost
			if h := d.GetHitsAddend(); h != nil {
				cost = int64(h.GetValue()) // at most math.MaxInt64: checked above
			}
			var share []string
			if shares != nil {
				share = shares[i]
			}
			checks = append(checks, core.Check{
				Limit: r.limit, Key: countedKey(domain, d.GetEntries(), share), Cost: cost,
				Refund: d.GetIsNegativeHits(),
			})
			owner = append(owner, i)
		}
	}
	if len(checks) == 0 {
		return resp, nil
	}
	// With QUOTA_MODE=true envoyproxy/ratelimit counts every descriptor but
	// an unlimited one as a quota descriptor, those without a limit
	// (unmatched, replaced) as quota descriptors that passed. With one of
	// those the quotas can never all be over: each limited descriptor, a
	// quota one, then stands on its own.
	var quotas int
	if s.opts.QuotaMode {
		for i, r := range rules {
			if resp.Statuses[i] != nil && (r == nil || !r.unlimited) {
				quotas++
			}
		}
	}
	results, err := s.decide(ctx, checks, s.opts.Independent || quotas > 0)
	if err != nil {
		return nil, err
	}
	now := s.opts.Clock()
	// As envoyproxy/ratelimit decides the overall code: OVER_LIMIT when an
	// enforced descriptor is over its limit, or when the request has
	// quota_mode descriptors and every one of them is (each one over its
	// limit answers OVER_LIMIT in its own status either way).
	var over, quotasOver int
	for j, i := range owner {
		st := s.status(rules[i], results, j, now)
		isOver := st.Code == rlsv3.RateLimitResponse_OVER_LIMIT
		switch {
		case checks[j].Limit.Quota && !checks[j].Refund:
			// A refund is never over its limit, and is not among the
			// core's quota checks (core.Limit.Quota).
			quotas++
			if isOver {
				quotasOver++
			}
		case isOver:
			over++
		}
		resp.Statuses[i] = st
	}
	if (over > 0 || (quotas > 0 && quotasOver == quotas)) && !s.opts.ShadowMode {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return resp, nil
}

// decided is the outcome of one check: its result, or failedOpen when the
// core failed open for it (the check is then answered OK).
type decided struct {
	core.CheckResult
	failedOpen bool
}

// failedOpen logs that the store failed with err and a check was allowed
// without a decision (--fail-open): one line a second, shared with the
// "store failed" lines.
func (s *Server) failedOpen(err error) {
	if ok, held := s.storeLog.Allow(); ok {
		s.opts.Logger.Warn("envoy rate limit: store failed; failing open", "err", err, "similar_lines_held_back", held)
	}
}

// decide runs the checks through the core, together or, when independent,
// one by one. When
// the core fails open for a set, every check of it failed open; deciding
// one by one, only the checks whose own decision failed open did, and the
// others keep their answers. The core does not fail open for a caller that
// had given up (core.CallerGaveUp): it returns the store's error, which
// ShouldRateLimit answers as the caller's; but a decided set's counting
// calls do not end with the caller, and their failure is the store's (see
// core.Decide).
func (s *Server) decide(ctx context.Context, checks []core.Check, independent bool) ([]decided, error) {
	out := make([]decided, len(checks))
	if !independent || len(checks) == 1 {
		d, err := s.core.Decide(ctx, checks...)
		if err != nil {
			return nil, err
		}
		if d.FailedOpen {
			s.failedOpen(d.StoreErr)
		}
		for j := range out {
			if d.FailedOpen {
				out[j].failedOpen = true
			} else {
				out[j].CheckResult = d.Results[j]
			}
		}
		return out, nil
	}
	for j, ch := range checks {
		d, err := s.core.Decide(ctx, ch)
		if err != nil {
			return nil, err
		}
		if d.FailedOpen {
			s.failedOpen(d.StoreErr)
			out[j].failedOpen = true
		} else {
			out[j].CheckResult = d.Results[0]
		}
	}
	return out, nil
}

// status translates check j's result into a descriptor status.
func (s *Server) status(r *rule, results []decided, j int, now time.Time) *rlsv3.RateLimitResponse_DescriptorStatus {
	if results[j].failedOpen {
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	res := results[j]
	st := &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               rlsv3.RateLimitResponse_OK,
		CurrentLimit:       r.current,
		DurationUntilReset: untilReset(res.Result, now),
	}
	if res.Allowed {
		st.LimitRemaining = uint32(min(max(res.Remaining, 0), math.MaxUint32))
	} else if !res.Shadow {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return st
}

// untilReset is the time from now to the end of res's window in whole
// seconds, rounded up, as envoyproxy/ratelimit reports it: at least 1, and
// at most the window's length. The end is the store's (Redis's TIME, the
// DB's clock, either of which may differ from now's): a denied res is
// measured from the store's own time of the decision (ResetAt -
// RetryAfter), and the bound keeps a skewed clock from announcing a wait
// the window cannot have.
func untilReset(res ratedb.Result, now time.Time) *durationpb.Duration {
	if !res.Allowed && res.RetryAfter > 0 {
		now = res.ResetAt.Add(-res.RetryAfter)
	}
	d := res.ResetAt.Sub(now)
	secs := int64((d + time.Second - 1) / time.Second)
	most := max(int64((res.Scale+time.Second-1)/time.Second), 1)
	return &durationpb.Duration{Seconds: min(max(secs, 1), most)}
}

func validDescriptor(i int, d *ratelimitv3.RateLimitDescriptor) error {
	if d == nil {
		return fmt.Errorf("%w: descriptor %d is null", ErrInvalidRequest, i)
	}
	if n := len(d.GetEntries()); n > MaxEntries {
		return fmt.Errorf("%w: descriptor %d has %d entries (at most %d)", ErrInvalidRequest, i, n, MaxEntries)
	}
	return nil
}

// toStatus maps an error of Check to a gRPC status. Messages never carry
// descriptor values.
func toStatus(err error) error {
	switch {
	case errors.Is(err, ErrInvalidRequest):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ratedb.ErrClosed), errors.Is(err, ratedb.ErrUnavailable), errors.Is(err, ratedb.ErrCorrupt):
		// The core reports a store that fails while resolving a limiter as
		// an invalid check wrapping the store's error: still the store.
		return status.Error(codes.Unavailable, "grpcapi: rate limit store unavailable")
	case errors.Is(err, core.ErrInvalidCheck):
		return status.Error(codes.InvalidArgument, "grpcapi: invalid check")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "grpcapi: request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "grpcapi: deadline exceeded")
	}
	return status.Error(codes.Unavailable, "grpcapi: rate limit store unavailable")
}
