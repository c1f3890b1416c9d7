package core

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratedb/ratedb"
)

// Limit is what a check is counted against: a named rule's algorithm and
// either one window (one tier, Layered false) or tiers decided together
// (ratedb.Layered). Build a Limit once per rule and reuse the pointer: the
// core caches the limiter it resolves on it. A Limit must not be changed
// after its first use; it is then safe for concurrent use.
type Limit struct {
	// Name is the rule's name, a metrics label with API.
	Name string
	// API is the protocol whose rule this is, APIHTTP or APIEnvoy: a
	// metrics label, since an HTTP rule and an Envoy config entry can have
	// the same Name (the rule "edge.user" and the domain "edge"'s key
	// "user"). It changes no decision.
	API string
	// Algorithm places the windows in time.
	Algorithm ratedb.Algorithm
	// Tiers holds one window (Layered false) or the tiers of a layered
	// limit. Limits are hits per Scale.
	Tiers []ratedb.Tier
	// Layered selects ratedb's Layered limiter even for a single tier.
	Layered bool
	// Shadow decides and counts like any other limit but never denies the
	// set: its results carry Shadow and its denial is only reported.
	Shadow bool
	// Quota makes the limit one of its set's quota limits, a soft limit
	// (envoyproxy/ratelimit's quota_mode): a quota check over its limit is
	// reported and not counted, and the set's quota checks deny it only
	// when every one of them is over its limit (a shadow quota check never
	// is; refunds are not among them). A single quota check therefore
	// denies when it is over, as any check does. Default false.
	Quota bool

	res atomic.Pointer[resolved]
}

// resolved is a Limit's limiter in one core.
type resolved struct {
	core    *Core
	window  WindowLimiter
	layered LayeredLimiter
	counter string // identifies the counters: algorithm, scales, layered
}

// Check is one key to count against one limit.
type Check struct {
	// Limit is the limit to apply; required.
	Limit *Limit
	// Key is the counted key: 1 to ratedb.MaxKeyLen bytes. Keys of limits
	// with the same algorithm and scales share counters.
	Key string
	// Cost is how much the check counts, >= 0. 0 is a peek: nothing is
	// counted and Allowed says whether a hit of cost 1 would fit now.
	Cost int64
	// Refund gives Cost back instead of counting it (see refund.go): the
	// key's count in its current window falls by Cost, never below zero.
	// A refund never denies its set and is applied only if the set is
	// allowed. Default false.
	Refund bool
}

// CheckResult is the outcome of one check.
type CheckResult struct {
	// Result is the check's own state and verdict, in ratedb's terms:
	// Allowed reports whether the check fit its limit (for a peek, whether
	// a hit of cost 1 would). When the set was denied because of another
	// check, a check that fit is reported with Allowed true but not
	// Counted, and its Count and Remaining are those before the set.
	ratedb.Result
	// Counted reports whether the check's cost was counted.
	Counted bool
	// Shadow is the Limit's Shadow flag.
	Shadow bool
}

// Decision is the outcome of a set of checks.
type Decision struct {
	// Allowed reports whether the set was admitted: every check that is
	// neither a shadow nor a quota check fit, so did at least one quota
	// check if the set has any, and the cost of every check that fit was
	// counted.
	Allowed bool
	// Results holds one result per check, in the order given (nil when the
	// decision failed open).
	Results []CheckResult
	// FailedOpen reports that the store failed and Options.FailOpen allowed
	// the set without deciding it.
	FailedOpen bool
	// StoreErr is, when FailedOpen, the store's error (it wraps
	// ratedb.ErrUnavailable and holds no key), for the caller's log.
	StoreErr error

	// undoFailed reports that a limit denied the set and taking back its
	// counted hits failed: Decide reports it to the Observer as a store
	// error once the set's locks are released.
	undoFailed bool
}

// The APIs a Limit comes from (Limit.API).
const (
	// APIHTTP marks the limits of the HTTP API's rules.
	APIHTTP = "http"
	// APIEnvoy marks the limits of the Envoy config's entries and of
	// Envoy's per-request limit overrides.
	APIEnvoy = "envoy"
)

// Observer receives what the core decides, for metrics. Its methods are
// called without any core lock held and must be safe for concurrent use.
// Each names the limit by its Limit.API and Limit.Name.
type Observer interface {
	// Checked is called once per check of a decided set, with the check's
	// own verdict.
	Checked(api, rule string, allowed bool)
	// WindowOpened is called for a counted check that opened a new window
	// (its count after the hit equals its cost).
	WindowOpened(api, rule string)
	// BoundarySpike is called when a key exhausts a window within 10% of
	// the window's scale after it began, having exhausted the window before
	// it (see spike.go).
	BoundarySpike(api, rule string)
	// StoreError is called once per set whose store failed, not for a set
	// whose store call failed once its caller had given up (CallerGaveUp),
	// unless that call was one counting a decided set, which the caller's
	// context does not end (see Decide).
	StoreError(api, rule string)
	// Decided is called once per set with the time the decision took.
	Decided(d time.Duration)
}

// Options configures a Core. The zero value selects every default.
type Options struct {
	// FailOpen allows a set when the store fails with an error wrapping
	// ratedb.ErrUnavailable (Decision.FailedOpen is then set), unless the
	// caller had given up (CallerGaveUp) before a call it could end failed:
	// the error is then returned. A failed call counting a decided set,
	// which the caller's context does not end, is failed open either way
	// (see Decide).
	// Default false: the error is returned and adapters answer 503 /
	// UNAVAILABLE.
	FailOpen bool
	// Observer receives decisions for metrics. Default: none.
	Observer Observer
	// Clock is the time source for peeks and boundary spikes. Default
	// time.Now.
	Clock func() time.Time
}

const numStripes = 4096

// Core decides sets of checks against a Store. It is safe for concurrent
// use.
type Core struct {
	store   Store
	opts    Options
	seed    maphash.Seed
	stripes [numStripes]sync.RWMutex
	spikes  spikeTable
}

// New returns a core deciding against store.
func New(store Store, opts Options) *Core {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Core{store: store, opts: opts, seed: maphash.MakeSeed()}
}

// Decide decides the checks all-or-nothing and returns one result per
// check. It returns an error wrapping ErrInvalidCheck for an invalid set
// (nothing counted), and the store's error (wrapping ratedb.ErrUnavailable
// for a network store that is down) when the store failed, unless
// Options.FailOpen applies; a set that fails takes back the hits it had
// counted. Once a set is decided, ctx's cancellation no longer stops it
// (only the store's own timeouts do), so it is never left half counted.
// When the store's call fails once the caller has given up
// (CallerGaveUp), Decide returns the store's error even with
// Options.FailOpen and reports no store error to the Observer: a network
// store's call that its caller's context ended is no store failure. The
// calls that count a decided set do not get the caller's context, so
// their failure is a store failure whenever the caller gave up.
// Being over a limit is a decision, not an error.
func (c *Core) Decide(ctx context.Context, checks ...Check) (Decision, error) {
	start := time.Now()
	res, err := c.resolveAll(checks)
	if err != nil {
		return Decision{}, err
	}
	var d Decision
	if len(checks) == 1 && !checks[0].Refund {
		d, err = c.decideOne(ctx, checks[0], res[0])
	} else {
		d, err = c.decideSet(ctx, checks, res)
	}
	if err != nil {
		// A caller that gave up is not a store failure: redisstore reports
		// a call its caller's context ended as ErrUnavailable too, though
		// Redis did not fail. Nobody waits for the answer, so it is not
		// failed open either; callers that wait see a store that fails.
		// A set's call made once the set was decided is not ended by its
		// caller (decideSet): its failure is the store's, whenever the
		// caller gave up.
		gone := CallerGaveUp(ctx) != nil
		var ce *committedError
		if errors.As(err, &ce) {
			err, gone = ce.err, false
		}
		if obs := c.opts.Observer; obs != nil {
			if !gone {
				obs.StoreError(checks[0].Limit.API, checks[0].Limit.Name)
			}
			obs.Decided(time.Since(start))
		}
		if !gone && c.opts.FailOpen && errors.Is(err, ratedb.ErrUnavailable) {
			return Decision{Allowed: true, FailedOpen: true, StoreErr: err}, nil
		}
		return Decision{}, err
	}
	if obs := c.opts.Observer; obs != nil && d.undoFailed {
		obs.StoreError(checks[0].Limit.API, checks[0].Limit.Name)
	}
	c.observe(checks, d, start)
	return d, nil
}

// CallerGaveUp returns the error of ctx once its caller has given up on a
// call: ctx ended, or its deadline has passed (a network store's socket
// timeout, set from that deadline, can come before ctx says so). It
// returns nil otherwise. A call that failed once its caller gave up is no
// store failure: the adapters answer it as the caller's cancellation or
// deadline (or not at all, a client that went away), and log nothing.
func CallerGaveUp(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// resolveAll validates the checks and returns their limiters.
func (c *Core) resolveAll(checks []Check) ([]*resolved, error) {
	if len(checks) == 0 {
		return nil, fmt.Errorf("%w: no checks", ErrInvalidCheck)
	}
	res := make([]*resolved, len(checks))
	for i, ch := range checks {
		switch {
		case ch.Limit == nil:
			return nil, fmt.Errorf("%w: check %d has no limit", ErrInvalidCheck, i)
		case ch.Key == "" || len(ch.Key) > ratedb.MaxKeyLen:
			return nil, fmt.Errorf("%w: check %d: key of %d bytes (1 to %d)", ErrInvalidCheck, i, len(ch.Key), ratedb.MaxKeyLen)
		case ch.Cost < 0:
			return nil, fmt.Errorf("%w: check %d: negative cost %d", ErrInvalidCheck, i, ch.Cost)
		}
		r, err := c.resolve(ch.Limit)
		if err != nil {
			return nil, fmt.Errorf("%w: check %d: %w", ErrInvalidCheck, i, err)
		}
		if ch.Refund && r.refunder() == nil {
			return nil, fmt.Errorf("%w: check %d: refunds need a single-window limit on a store that can refund", ErrInvalidCheck, i)
		}
		res[i] = r
	}
	return res, nil
}

// resolve returns l's limiter in c, cached on l.
func (c *Core) resolve(l *Limit) (*resolved, error) {
	if r := l.res.Load(); r != nil && r.core == c {
		return r, nil
	}
	if len(l.Tiers) == 0 {
		return nil, errors.New("limit has no tiers")
	}
	if len(l.Tiers) > 1 && !l.Layered {
		return nil, errors.New("several tiers need Layered")
	}
	r := &resolved{core: c}
	var id strings.Builder
	id.WriteString(strconv.Itoa(int(l.Algorithm)))
	if l.Layered {
		id.WriteString("L")
	}
	// The stores keep a layered limit's tiers by scale: tiers given in
	// another order share its counters.
	scales := make([]int64, len(l.Tiers))
	for i, t := range l.Tiers {
		scales[i] = t.Scale.Milliseconds()
	}
	if l.Layered {
		slices.Sort(scales)
	}
	for _, ms := range scales {
		id.WriteString("/" + strconv.FormatInt(ms, 10))
	}
	r.counter = id.String()
	var err error
	if l.Layered {
		r.layered, err = c.store.Layered(l.Algorithm, l.Tiers...)
	} else {
		if l.Tiers[0].Limit < 0 {
			return nil, fmt.Errorf("limit %d is negative", l.Tiers[0].Limit)
		}
		r.window, err = c.store.Window(l.Algorithm, l.Tiers[0].Scale)
	}
	if err != nil {
		return nil, err
	}
	l.res.Store(r)
	return r, nil
}

// stripe returns the index of key's lock stripe.
func (c *Core) stripe(key string) int {
	return int(maphash.String(c.seed, key) % numStripes)
}

// decideOne decides a single check: one Hit (or a peek) under its stripe's
// shared lock.
func (c *Core) decideOne(ctx context.Context, ch Check, r *resolved) (Decision, error) {
	mu := &c.stripes[c.stripe(ch.Key)]
	mu.RLock()
	var (
		res ratedb.Result
		err error
	)
	if ch.Cost == 0 {
		res, err = c.peek(ctx, ch, r, 0)
	} else {
		res, err = r.hit(ctx, ch)
	}
	mu.RUnlock()
	if err != nil {
		return Decision{}, err
	}
	cr := CheckResult{Result: res, Counted: res.Allowed && ch.Cost > 0, Shadow: ch.Limit.Shadow}
	return Decision{Allowed: res.Allowed || ch.Limit.Shadow, Results: []CheckResult{cr}}, nil
}

// decideSet decides several checks: every stripe locked exclusively in
// sorted order, a peek of every check, then the hits if the set fits.
func (c *Core) decideSet(ctx context.Context, checks []Check, rs []*resolved) (Decision, error) {
	idx := make([]int, len(checks))
	for i, ch := range checks {
		idx[i] = c.stripe(ch.Key)
	}
	locks := slices.Clone(idx)
	slices.Sort(locks)
	locks = slices.Compact(locks)
	for _, s := range locks {
		c.stripes[s].Lock()
	}
	defer func() {
		for _, s := range locks {
			c.stripes[s].Unlock()
		}
	}()

	d := Decision{Allowed: true, Results: make([]CheckResult, len(checks))}
	var quota quotaGroup
	for i, ch := range checks {
		// Earlier checks of the set on the same counters count first.
		var pending int64
		// A check that does not fit (a shadow or quota check over its
		// limit) counts nothing.
		for j := range i {
			if checks[j].Key == ch.Key && rs[j].counter == rs[i].counter && !checks[j].Refund && d.Results[j].Allowed {
				pending += checks[j].Cost
			}
		}
		if ch.Refund {
			// A refund always fits; it is reported with the state before it.
			res, err := c.peek(ctx, Check{Limit: ch.Limit, Key: ch.Key}, rs[i], 0)
			if err != nil {
				return Decision{}, err
			}
			res.Allowed, res.RetryAfter = true, 0
			d.Results[i] = CheckResult{Result: res, Shadow: ch.Limit.Shadow}
			continue
		}
		res, err := c.peek(ctx, ch, rs[i], pending)
		if err != nil {
			return Decision{}, err
		}
		d.Results[i] = CheckResult{Result: res, Shadow: ch.Limit.Shadow}
		switch {
		case ch.Limit.Quota:
			quota.add(res.Allowed || ch.Limit.Shadow)
		case !res.Allowed && !ch.Limit.Shadow:
			d.Allowed = false
		}
	}
	if !d.Allowed || quota.exhausted() {
		d.Allowed = false
		return d, nil
	}
	// The hits, then the refunds: a refund is applied only if the request
	// is allowed. A hit the peek said fits is denied only when another
	// process sharing the store counted the key meanwhile; the set is then
	// denied, the checks after it are not counted, no refund is applied,
	// and the hits before it are undone.
	//
	// The set is decided: from here the caller's cancellation (Envoy's
	// rate-limit timeout, a client that hangs up) no longer reaches the
	// store, so that it cannot leave part of the set counted. Each call of
	// a network store is still bounded by the store's own timeout. A call
	// that fails all the same takes the set's counted hits back (see
	// commitFailed).
	if err := ctx.Err(); err != nil {
		return Decision{}, err // nothing counted yet
	}
	ctx = context.WithoutCancel(ctx)
	peeks := make([]ratedb.Result, len(checks))
	for i, ch := range checks {
		if ch.Refund || ch.Cost == 0 || !d.Results[i].Allowed {
			continue // a refund, a peek, or a shadow or quota check over its limit
		}
		peeks[i] = d.Results[i].Result
		res, err := rs[i].hit(ctx, ch)
		if err != nil {
			return commitFailed(ctx, err, checks[:i], rs, d.Results, peeks)
		}
		d.Results[i].Result = res
		d.Results[i].Counted = res.Allowed
		if !res.Allowed && !ch.Limit.Shadow {
			if ch.Limit.Quota {
				if quota.lose(); !quota.exhausted() {
					continue // another quota check of the set still fits
				}
			}
			d.Allowed = false
			if err := undo(ctx, checks[:i], rs, d.Results, peeks); err != nil {
				// The set is denied all the same: a limit decided it.
				// Answering the undo's error would let FailOpen (or a
				// caller that lets requests through on UNAVAILABLE) admit
				// it. The hits not undone stay counted and are reported
				// Counted; the failure reaches the observer, labelled
				// as every store error of a set is, from Decide once
				// the stripes are unlocked (Observer).
				d.undoFailed = true
			}
			return d, nil
		}
	}
	// A peek reports the state after the set's earlier hits on its
	// counters, as if it came after them (they are counted now).
	// The last of those hits reports the key after all of them (in the
	// window it counted in, which may have begun after the peek).
	for i, ch := range checks {
		if ch.Refund || ch.Cost != 0 {
			continue
		}
		last := -1
		for j := range i {
			if d.Results[j].Counted && !checks[j].Refund && checks[j].Key == ch.Key && rs[j].counter == rs[i].counter {
				last = j
			}
		}
		if last >= 0 {
			d.Results[i].Result = stateAfter(d.Results[i].Result, d.Results[last].Result, c.opts.Clock())
		}
	}
	for i, ch := range checks {
		if !ch.Refund || ch.Cost == 0 {
			continue
		}
		res, err := c.refund(ctx, ch, rs[i])
		if err != nil {
			return commitFailed(ctx, err, checks, rs, d.Results, peeks)
		}
		d.Results[i].Result = res
	}
	return d, nil
}

// quotaGroup tallies a set's quota checks (Limit.Quota): how many there
// are and how many fit.
type quotaGroup struct{ total, fit int }

// add counts one quota check, which fits or not.
func (q *quotaGroup) add(fits bool) {
	q.total++
	if fits {
		q.fit++
	}
}

// lose records that a quota check counted as fitting was denied when hit
// (another process sharing the store counted its key meanwhile).
func (q *quotaGroup) lose() { q.fit-- }

// exhausted reports whether the set has quota checks and none fits: they
// then deny the set.
func (q *quotaGroup) exhausted() bool { return q.total > 0 && q.fit == 0 }

// commitFailed handles a store call of a decided set that failed with err:
// it undoes the hits counted among checks, so that a set that answers an
// error counts nothing, and returns err (joined with the undo's error, if
// that fails too). Two things it cannot take back: the failed call itself,
// if a network store counted it before its timeout (the outcome of a timed
// out call is unknown), and the refunds applied before a failed refund.
func commitFailed(ctx context.Context, err error, checks []Check, rs []*resolved, results []CheckResult, peeks []ratedb.Result) (Decision, error) {
	if uerr := undo(ctx, checks, rs, results, peeks); uerr != nil {
		err = errors.Join(err, fmt.Errorf("core: taking back the set's counted hits: %w", uerr))
	}
	return Decision{}, &committedError{err: err}
}

// committedError is the error of a set whose store call failed once the
// set was decided (commitFailed): those calls run without the caller's
// context, so their failure is the store's even if the caller has given
// up meanwhile. Decide unwraps it.
type committedError struct{ err error }

func (e *committedError) Error() string { return e.err.Error() }
func (e *committedError) Unwrap() error { return e.err }

// undo takes back the counted hits among checks (the checks before the one
// that denied the set), each from the window it counted in (see Undoer),
// and reports them as not counted, with the state their peek saw. A hit on
// a limiter that cannot undo stays counted. Each undo is one step in the
// store; an error leaves the hits not yet undone counted.
func undo(ctx context.Context, checks []Check, rs []*resolved, results []CheckResult, peeks []ratedb.Result) error {
	for j, ch := range checks {
		if !results[j].Counted {
			continue
		}
		u := rs[j].undoer()
		if u == nil {
			continue
		}
		if err := u.Undo(ctx, ch.Key, results[j].Result, ch.Cost); err != nil {
			return err
		}
		results[j].Result, results[j].Counted = peeks[j], false
	}
	return nil
}

// hit counts ch through its limiter.
func (r *resolved) hit(ctx context.Context, ch Check) (ratedb.Result, error) {
	if r.layered != nil {
		return r.layered.Hit(ctx, ch.Key, ch.Cost)
	}
	return r.window.Hit(ctx, ch.Key, ch.Limit.Tiers[0].Limit, ch.Cost)
}
